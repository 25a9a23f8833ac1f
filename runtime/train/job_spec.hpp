#pragma once
// JobSpec: everything one training job needs, read from a TOML file (docs/job-spec.md).
// Unknown keys and bad values are ConfigErrors that name the key.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/half.hpp"
#include "core/lr_schedule.hpp"
#include "core/optimizer_kind.hpp"
#include "device/types.hpp"
#include "embedding/types.hpp"  // Pooling, HotSet, ColdUpdate
#include "mlp/types.hpp"        // InteractionKind

namespace recmix::runtime {

// The job spec's choices, typed once by the parser: the only place their spellings are checked.
// Where a lower layer owns the enum the spec uses it (device::BackendKind, device::CpuGemm,
// mlp::InteractionKind, embedding::Pooling, embedding::HotSet, embedding::ColdUpdate,
// half::Storage, DenseOptimizerKind, SparseOptimizerKind); the rest are the spec's own.
enum class DenseReplicas { automatic, on, off };        // device.dense_replicas: "auto" | "on" | "off"
enum class AutoSwitch { automatic, on, off };           // device.graphs, device.l2_window: "auto" | true | false
enum class WhenBusy { wait, skip };                     // checkpoint.when_busy
enum class DensePrecision { fp32, tf32, bf16, automatic };  // precision.dense: "fp32" | "tf32" | "bf16" | "auto"
enum class Rounding { stochastic, nearest };            // precision.rounding

// The spelling of a choice in a job spec ("dcn", "cpu-strict", "auto", "true", ...): the same
// text the parser takes, for logs, messages and the command line's overrides.
template <class Choice>
std::string_view spelling(Choice value);
// The choice spelled `text`; ConfigError "'<key>' must be one of a, b, c (got "x")" otherwise.
// AutoSwitch takes "auto", "true" and "false" (the command line's spellings of the TOML values).
template <class Choice>
Choice parse_choice(std::string_view text, const std::string& key);

struct ModelSpec {
  std::vector<std::int64_t> table_rows;  // empty: take from the dataset
  int embedding_dim = 16;
  std::vector<int> bottom_mlp = {512, 256, 64, 16};  // layer widths after the dense input
  std::vector<int> top_mlp = {512, 256, 1};          // layer widths after the interaction
  mlp::InteractionKind interaction = mlp::InteractionKind::dot;  // dot | cat | dcn (DCN-V2 cross layers on the cat vector)
  int cross_layers = 3;                              // dcn: cross layers
  int cross_rank = 512;                              // dcn: their rank; 0: full n x n matrices
  embedding::Pooling pooling = embedding::Pooling::sum;  // sum | mean
};

struct OptimizerSpec {
  DenseOptimizerKind dense = DenseOptimizerKind::sgd;              // sgd | adagrad | adam
  SparseOptimizerKind sparse = SparseOptimizerKind::sgd;  // sgd | adagrad | rowwise_adagrad
  float lr = 0.1f;
  float sparse_lr = -1.f;  // < 0: same as lr
  float eps = -1.f;        // < 0: the optimizer's default
  float initial_accumulator = 0.f;
  // warmup_steps, decay_start, decay_steps, decay_power: both optimizers' rates over the steps
  // (core/lr_schedule.hpp; none by default).
  LrSchedule schedule;
};

struct DataSpec {
  std::vector<std::string> train;
  std::vector<std::string> eval;
  bool shuffle = false;
  std::int64_t shuffle_window = 0;
  int prefetch = 2;
};

struct TrainSpec {
  std::int64_t batch_size = 128;  // global batch, split over ranks
  std::int64_t steps = 0;         // 0: run `epochs` epochs
  std::int64_t epochs = 1;
  std::int64_t eval_interval = 0;  // steps; 0: only at the end (when eval data is given)
  std::int64_t eval_per_epoch = 0;  // evaluations an epoch (instead of eval_interval); 0: unset
  double target_auc = 0;           // (0.5, 1]: stop at the first evaluation reaching it; 0: unset
  bool mllog = false;              // write <run_dir>/mllog.txt, the MLPerf log (mllog.hpp)
  std::int64_t eval_batches = 0;   // 0: the whole eval set
  double log_interval_s = 2.0;     // seconds between progress lines
  std::int64_t log_interval = 0;   // steps between progress lines as well; 0: by time only
};

struct CheckpointSpec {
  std::string dir;           // empty: <run_dir>/checkpoints
  std::int64_t interval = 0;  // steps; 0: only at the end
  int keep = 2;              // most recent checkpoints kept
  // Write checkpoints on a background thread from a host copy of the state (recmix train; jobs
  // of recmix run write in the step). when_busy: a checkpoint due while the previous write is
  // still going waits for it ("wait") or is left out ("skip").
  bool async = false;
  WhenBusy when_busy = WhenBusy::wait;
};

struct DeviceSpec {
  device::BackendKind kind = device::BackendKind::cpu;  // cpu | cuda | cpu-strict (the strict device emulator, for tests)
  int threads = 1;           // per rank
  DenseReplicas dense_replicas = DenseReplicas::automatic;  // cpu, several threads per rank: auto | on | off
  device::CpuGemm gemm = device::CpuGemm::automatic;       // cpu: auto | openblas | onednn
  // Steps replayed from captured graphs (device/graph.hpp): true | false | "auto" (on for
  // cuda, Backend::graphs_by_default; off elsewhere: cpu-strict emulates them, the cpu backend has
  // none).
  AutoSwitch graphs = AutoSwitch::automatic;
  // The embedding's hot rows (tiered: the hot slots; untiered: every local row) in an L2
  // persisting window (device/backend.hpp, set_l2_window): true | false | "auto" (on where the
  // backend has such a cache: cuda, emulated by cpu-strict).
  AutoSwitch l2_window = AutoSwitch::automatic;
  std::uint64_t memory_capacity = 0;       // bytes of device memory; 0: unlimited
  std::uint64_t host_memory_capacity = 0;  // bytes of host-tier memory; 0: unlimited
  // Set by recmix run, not a job-spec key: other jobs' device collectives share this rank's
  // device, so the job's run in epochs (comm/epoch).
  bool shared = false;
  // Set by recmix run from the job's priority, not a job-spec key: the priority of the job's
  // streams (Backend::set_stream_priority; higher runs first on a GPU).
  int priority = 0;
};

// The hot/cold tiers of the embedding tables (docs/embedding.md). Tiered when hot_fraction or
// device_budget is set: each shard's hot rows in the device pool, every row in the host tier.
struct EmbeddingSpec {
  double hot_fraction = 0;             // (0, 1]: share of each shard's rows kept on the device; 0: unset
  std::uint64_t device_budget = 0;     // bytes of one rank's hot rows and staging; 0: unset
  embedding::HotSet hot_set = embedding::HotSet::counts;  // counts (the dataset's /access_counts) | lfu (counted online)
  std::int64_t rerank_interval = 0;    // steps between re-ranks of the hot set; 0: lfu 100, counts never
  embedding::ColdUpdate cold_update = embedding::ColdUpdate::device;  // device (in staging, written back) | host (in the host tier)
  bool tiered() const { return hot_fraction > 0 || device_budget > 0; }
};

// [precision] (docs/math.md). dense: the MLPs' GEMM inputs (fp32, or bf16 with fp32 accumulation
// and fp32 master weights; auto: bf16 where the backend runs it natively, else fp32). embedding:
// how the tables are stored (pooling and the optimizer's arithmetic stay fp32); rounding: how an
// updated 16-bit weight is rounded back.
struct PrecisionSpec {
  DensePrecision dense = DensePrecision::fp32;      // fp32 | tf32 | bf16 | auto
  half::Storage embedding = half::Storage::fp32;    // fp32 | fp16 | bf16
  Rounding rounding = Rounding::stochastic;         // stochastic | nearest
};

struct JobSpec {
  std::string name = "job";
  std::uint64_t seed = 1;
  std::string run_dir;   // empty: runs/<name>
  std::string sharding = "auto";  // "auto" or a plan in embedding::ShardingPlan::parse syntax
  ModelSpec model;
  EmbeddingSpec embedding;
  OptimizerSpec optimizer;
  DataSpec data;
  TrainSpec train;
  CheckpointSpec checkpoint;
  DeviceSpec device;
  PrecisionSpec precision;
  std::string source_text;  // the TOML as given, stored in checkpoints
};

// Parses TOML text; `origin` names the file in errors. Relative data paths resolve against
// base_dir when it is not empty.
JobSpec parse_job_spec(const std::string& toml_text, const std::string& origin,
                       const std::string& base_dir = "");
JobSpec load_job_spec(const std::string& path);

// The steps the job trains for: train.steps, or train.epochs epochs of batches_per_epoch.
inline std::int64_t total_steps(const JobSpec& spec, std::int64_t batches_per_epoch) {
  return spec.train.steps > 0 ? spec.train.steps : spec.train.epochs * batches_per_epoch;
}

// Whether a job resumed at `step` has no step left to train: it is at or past total_steps.
// recmix train asks it before starting (and says so, touching nothing), the trainer again after
// loading the checkpoint; both ask here so that they cannot disagree.
inline bool no_step_left(const JobSpec& spec, std::int64_t step, std::int64_t batches_per_epoch) {
  return step >= total_steps(spec, batches_per_epoch);
}

// path relative to base_dir (unchanged when absolute, or when base_dir is empty).
std::string resolve_path(const std::string& path, const std::string& base_dir);
// The whole file; IoError "cannot open <what> '<path>'" when it cannot be read.
std::string read_text_file(const std::string& path, const std::string& what);

// "4GiB", "512 MiB", "1000000" -> bytes; ConfigError naming key on bad text.
std::uint64_t parse_byte_size(const std::string& text, const std::string& key);

}  // namespace recmix::runtime
