#pragma once
// What the scheduler knows about a DLRM training job before it runs: the model shape, batch,
// optimizer, tiering, rank count, length and priority. The memory estimator and the roofline
// profile are functions of this spec alone.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/optimizer_kind.hpp"

namespace recmix::sched {

// The job's optimizers, as the layers that run them name them (core/optimizer_kind.hpp, with
// the state each keeps: dense_state_per_param, sparse_state_per_row). Their names are parsed once,
// by the job spec (runtime/train/job_spec.cpp).
using Optimizer = DenseOptimizerKind;
using SparseOptimizer = SparseOptimizerKind;

// The math of the MLPs' GEMMs ([precision] dense): fp32 runs a GPU's plain FP32 (SIMT) units, not
// its tensor cores; tf32 its TF32 tensor cores; bf16 reads bf16 copies of the operands and
// accumulates in fp32.
enum class GemmMath { fp32, tf32, bf16 };
GemmMath parse_gemm_math(std::string_view name);  // "fp32" | "tf32" | "bf16"; ConfigError otherwise

struct TableShape {
  std::int64_t rows = 0;
  int dim = 0;
};

struct DlrmShape {
  std::vector<TableShape> tables;
  std::vector<int> bottom_mlp;  // layer widths including the input: {13, 512, 256, 64, 16}
  std::vector<int> top_mlp;     // layer widths excluding the interaction input: {512, 256, 1}
  int pooling = 1;              // indices per bag (1 = one-hot)
  bool concat_interaction = false;  // "cat": the bottom output and the pooled vectors side by side
  // "dcn": that vector, n = F x dim wide, through cross_layers DCN-V2 cross layers of rank
  // cross_rank (0: full n x n matrices); 0 layers: no cross network.
  int cross_layers = 0;
  int cross_rank = 0;
  int dense_features() const { return bottom_mlp.empty() ? 0 : bottom_mlp.front(); }
  int embedding_dim() const { return tables.empty() ? 0 : tables.front().dim; }
  // Width of the interaction output fed to the top MLP: dim + F(F-1)/2 for the dot interaction,
  // F x dim for concatenation and the cross network, F = tables + 1.
  int interaction_width() const;
  std::int64_t cross_params() const;      // weights + biases of the cross layers
  double cross_macs() const;              // multiply-adds of their forward, per sample
  std::int64_t embedding_params() const;  // sum rows x dim
  std::int64_t dense_params() const;      // weights + biases of both MLPs and the cross layers
};

// Hot/cold tiers of the embedding rows: each owned shard's hot rows on the device, every owned
// row in host memory. The hot rows come from device_budget when it is set, else hot_fraction.
struct Tiering {
  bool enabled = false;
  double hot_fraction = 1.0;        // share of each shard's rows kept on the device
  double hot_hit_rate = 0.9;        // share of lookups served by hot rows (Zipf-skewed data)
  std::uint64_t device_budget = 0;  // bytes of one rank's hot and staging rows; 0: unset
  // Staged rows pass through pinned host memory (a device whose memory is not host memory:
  // cuda, cpu-strict); the CPU backend stages in place.
  bool pinned_transit = false;
};

struct JobSpec {
  std::string name;
  DlrmShape shape;
  int global_batch = 2048;  // samples per step over all ranks
  Optimizer optimizer = Optimizer::adagrad;                     // the MLPs
  SparseOptimizer sparse_optimizer = SparseOptimizer::adagrad;  // the embedding tables
  Tiering tiering;
  int table_bytes = 4;  // bytes an embedding weight is stored in: 4 (fp32), 2 (fp16, bf16)
  GemmMath gemm_math = GemmMath::fp32;  // [precision] dense
  bool bf16_gemms() const { return gemm_math == GemmMath::bf16; }  // the operands' bf16 copies exist
  // The step's dense pieces replayed from CUDA graphs (device.graphs; "auto" is on for cuda): one
  // graph launch issues what took many launches.
  bool graphs = false;
  // The embedding layer's device path (cuda, cpu-strict): its kernels read index arrays copied to
  // the device and group the backward's entries there; the CPU backend's read the host's arrays.
  bool device_kernels = false;
  int ranks = 1;
  std::int64_t steps = 1000;
  int priority = 0;
  double arrival_s = 0;
  int local_batch() const { return (global_batch + ranks - 1) / ranks; }
};

// Throws ConfigError naming the field when a spec is not usable (no tables, widths < 1, ...).
void validate(const JobSpec& spec);

// Reference shapes used by the simulator's workload mixes (docs/scheduler.md lists them):
// "dlrm-small" (Criteo Kaggle-like, 26 x 1e5 rows, dim 16), "dlrm-medium" (26 x 1e6, dim 64),
// "dlrm-large" (26 x 1e7, dim 128, tiered, hot 10%), "dlrm-xlarge" (Criteo Terabyte-like
// 26 x 4e7, dim 128, tiered, hot 5%).
// "dlrm-dcnv2" is the MLPerf Training DLRM-DCNv2 benchmark's model (the Criteo 1TB tables
// capped at 40M rows, dim 128, 3 cross layers of rank 512, ~8 lookups a bag, global batch 65536
// on 8 ranks, tiered, hot 5%): a job type of its own, not one of the mixes' sizes.
JobSpec dlrm_preset(std::string_view name);
const std::vector<std::string>& dlrm_preset_names();  // the mixes' sizes, smallest first
const std::vector<std::string>& dlrm_type_names();    // those and dlrm-dcnv2

}  // namespace recmix::sched
