#pragma once
// DlrmModel: one rank's share of a hybrid-parallel DLRM. The embedding layer is model-parallel
// (ShardedEmbedding over the job's communicator), the MLPs are data-parallel replicas whose
// gradients are all-reduced in two buckets (the top MLP's contiguous gradient buffer, then the
// bottom's), each started as soon as it is ready so the reduction overlaps the rest of the
// backward pass and the embedding gradient exchange.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "data/reader.hpp"
#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "embedding/sharded_embedding.hpp"
#include "mlp/interaction.hpp"
#include "mlp/loss.hpp"
#include "mlp/mlp.hpp"
#include "mlp/dense_optimizer.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/train/step_graphs.hpp"

namespace recmix::runtime {

// How [precision] asks the embedding tables to be stored.
embedding::TableStorage table_storage(const PrecisionSpec& precision);
// Whether the MLPs' GEMMs take bf16 operands on `backend` ([precision] dense, docs/math.md): "bf16"
// on CUDA, on the strict emulator (whatever the CPU: it emulates a device), and on the CPU backend
// where the CPU has AVX512_BF16 and the GEMM library is oneDNN, else a ConfigError naming what is
// missing; "auto" where "bf16" would be accepted, fp32 elsewhere; "fp32" never.
bool bf16_dense(const PrecisionSpec& precision, const device::Backend& backend);

class DlrmModel {
 public:
  // tables (rows, each table's initial bound) and num_dense come from the dataset (checked
  // against the spec by the caller; every table's dim is spec.model.embedding_dim), and
  // bag_rows, its longest bag: the embedding's step buffers are made for it and for a global
  // batch of spec.train.batch_size at the start (ShardedEmbedding::reserve).
  // comm carries host buffers (the loss, the embedding's staged exchange), device_comm the
  // dense gradients in device memory (NCCL on CUDA; the same as comm on the CPU backend).
  DlrmModel(const JobSpec& spec, const std::vector<embedding::TableSpec>& tables, int num_dense,
            comm::Communicator& comm, comm::Communicator& device_comm, device::Backend& backend, device::MemoryPool& device_pool,
            std::int64_t max_local_batch, const embedding::ShardingPlan& plan,
            embedding::TierOptions tiers = {}, std::int64_t bag_rows = 1);

  // Rows per replica from which "auto" turns the dense replicas on (one rank only: on several
  // ranks, where they also work, "on" asks for them; their speed there is unmeasured, since
  // ranks x threads oversubscribe the 2-core build machine). With OpenBLAS each replica's
  // GEMMs need enough rows (measured: a win at batch 2048 on 2 threads, a loss at 128). With
  // oneDNN they win from batch 128 on 2 threads, are even at 64 and lose at 16, where the
  // replicas' fixed costs (the gradient sum over every parameter) outweigh the GEMMs
  // (bench/RESULTS.md).
  static std::int64_t replica_min_rows(device::GemmLibrary gemm) {
    return gemm == device::GemmLibrary::onednn ? 64 : 256;
  }

  // One training step on this rank's slice of a global batch of global_batch samples.
  // Collective over the communicator. Its loss stays on the device, added to a running total that
  // take_loss() reads, so that the host does not wait for the step (docs/device.md).
  // next: the batch of the step after this one, when known (tiered tables gather its cold rows
  // while this step computes; embedding::ShardedEmbedding::prefetch). Every rank passes one or
  // none at the same steps: a rank whose next read failed passes an empty batch.
  void train_step_async(const data::Batch& batch, std::int64_t global_batch, const data::Batch* next = nullptr);
  // The mean loss per sample over the global batches of the train_step_async calls since the last
  // take_loss (NaN after none), then a new total. Collective: one copy and one wait for the
  // device total, and a sum over the ranks.
  double take_loss();
  // Whether every dense parameter is finite: a flag set on the device, one copy and one wait (the
  // log records' divergence check; checkpoint.hpp's first_non_finite names a culprit).
  bool dense_finite();
  // train_step_async then take_loss: the loss of this step's whole global batch.
  double train_step(const data::Batch& batch, std::int64_t global_batch, const data::Batch* next = nullptr) {
    train_step_async(batch, global_batch, next);
    return take_loss();
  }

  // Forward only: writes the click probability of each local sample to probs (size batch.size).
  // Collective (the embedding lookup is).
  void predict(const data::Batch& batch, float* probs);

  // Per-phase wall time of train_step(), summed over the steps since enabled (for benchmarks).
  // While enabled, every phase ends with a stream synchronisation, so device work is timed where
  // it runs (and loses its overlap with the host); on the CPU backend work is synchronous anyway.
  enum Phase {
    embedding_forward_start, bottom_forward, embedding_forward_finish, interaction_forward,
    top_forward, loss, top_backward, interaction_backward, embedding_backward_start, bottom_backward,
    embedding_backward_finish, dense_update, dense_replicas, gradient_sum, num_phases
  };
  // Replicas of the dense half run data-parallel on this rank's threads (device.dense_replicas).
  int dense_replicas_count() const { return static_cast<int>(replicas_.size()); }
  // Whether the step's dense middle is replayed from captured graphs (device.graphs).
  bool uses_graphs() const { return graphs_->on(); }
  // Bytes of hot embedding rows in the L2 persisting window (device.l2_window); 0: none.
  std::size_t l2_window_bytes() const { return l2_window_bytes_; }
  bool dense_in_bf16() const { return bottom_->bf16_gemms(); }
  static std::string_view phase_name(int phase);
  void set_phase_timing(bool on);
  const std::array<double, num_phases>& phase_seconds() const { return phase_seconds_; }
  // Called at the end of every phase of train_step() (tests inject failures inside a step with it).
  void set_phase_hook(std::function<void(Phase)> hook) { phase_hook_ = std::move(hook); }
  std::int64_t timed_steps() const { return timed_steps_; }

  std::vector<mlp::Param> dense_parameters();  // bottom, the interaction's (dcn), top
  mlp::DenseOptimizer& dense_optimizer() { return *dense_optimizer_; }
  embedding::ShardedEmbedding& embedding() { return *embedding_; }
  device::Backend& backend() { return backend_; }
  int num_tables() const { return static_cast<int>(table_rows_.size()); }
  int num_dense() const { return num_dense_; }
  const std::vector<std::int64_t>& table_rows() const { return table_rows_; }

 private:
  // The constructor's parts: the dense replicas (device.dense_replicas), the step's buffers.
  void make_replicas(const JobSpec& spec, device::MemoryPool& pool, int k);
  void allocate_step_buffers(device::MemoryPool& pool, int k);
  const float* forward(const data::Batch& batch);
  // Copies the dense features and labels to the device and starts the embedding lookups
  // (ShardedEmbedding::forward_start), in whichever index layout the batch holds.
  void start_batch(const data::Batch& batch, bool training = false);
  // The batch's dense features and labels to the device: through a pinned upload slot where the
  // device is not host memory (uploads_).
  void upload(const data::Batch& batch);
  void train_step_replicas(const data::Batch& batch, std::int64_t global_batch, const data::Batch* next);
  void prefetch_next(const data::Batch& next);
  bool prefetched_ = false;  // the embedding holds the plan of the batch this step trains on
  // Runs body(r) for every replica r, each on its own thread, with single-threaded GEMMs.
  template <class F>
  void on_replicas(const F& body);
  // Replica r's share of a local batch: first sample and count.
  std::pair<std::int64_t, int> replica_rows(int r, int batch) const;
  // Replica r's forward over its share of the staged inputs and pooled embeddings.
  const float* replica_forward(int r, std::int64_t first, int rows);
  void mark(Phase phase);  // ends `phase` when phase timing is on
  void begin_phases();     // a step's first phase starts now, when phase timing is on
  // The dense middle of a step: interaction and top MLP forward, the loss and its gradient, the
  // top MLP's backward (with its folded SGD step), through graphs_; returns the gradient of the
  // interaction's output. `then`, if any, is issued last in the same piece (the top MLP's
  // gradient all-reduce, where the device communicator captures collectives).
  const float* dense_middle(const float* bottom_out, int b, std::int64_t global_batch,
                            const std::function<void()>& then = nullptr);
  // The dense optimizer's step (unless folded into the backward, or `issued` in the bottom MLP's
  // backward piece already), the end of a training step.
  void finish_dense_step(bool issued = false);
  // Makes a step's gradient all-reduces complete before what follows on the stream: waited for
  // on the host, or, where the device communicator orders them on the stream (NCCL), kept in
  // reduces_in_flight_ until they are done, without a wait.
  void settle(std::vector<std::unique_ptr<comm::Request>>& reduces);
  // Drops the graphs of the pieces holding embedding work (the pooling, the sparse update) when
  // the embedding has made one of the device buffers they read anew since their capture.
  void forget_stale_embedding_pieces();
  // The embedding's backward_start, through graphs_ where the embedding says it can be captured.
  void start_embedding_backward(int b, std::int64_t global_batch);

  comm::Communicator& comm_;
  comm::Communicator& device_comm_;
  device::Backend& backend_;
  std::unique_ptr<device::Stream> stream_;
  std::vector<std::int64_t> table_rows_;
  int num_dense_;
  int dim_;
  std::int64_t max_local_batch_;
  std::unique_ptr<mlp::Mlp> bottom_;
  std::unique_ptr<mlp::Mlp> top_;
  std::unique_ptr<mlp::Interaction> interaction_;
  std::unique_ptr<embedding::ShardedEmbedding> embedding_;
  std::unique_ptr<mlp::DenseOptimizer> dense_optimizer_;
  // One rank with plain SGD: no gradient all-reduce has to come between the MLPs' gradients and
  // their step, so the step is folded into the backward (Mlp::backward_sgd) or, with replicas,
  // into the pass that sums the replicas' gradients; finish_dense_step() then only counts it.
  float sgd_lr_ = 0.f;
  bool fold_sgd_ = false;
  // [optimizer]'s schedule: the dense rate's factor is computed on the device by the optimizer;
  // the sparse rate (the base sparse_lr_ times the factor) is set by the host every step.
  LrSchedule schedule_;
  float sparse_lr_ = 0.f;
  // A rank on the CPU with several threads (device.dense_replicas): the dense half (both MLPs,
  // the interaction, the loss) runs data-parallel, one replica per thread on a contiguous share
  // of the rank's batch with single-threaded GEMMs, and the replicas' gradients are summed
  // (then, on several ranks, all-reduced) before the optimizer step. On these skinny layers that
  // beats splitting every GEMM over the threads, and the element-wise work runs on all threads
  // (bench/RESULTS.md). The embedding layer works on
  // the whole batch with all threads.
  struct Replica {
    std::unique_ptr<mlp::Mlp> bottom, top;
    std::unique_ptr<mlp::Interaction> interaction;
    std::unique_ptr<device::Stream> stream;
  };
  std::unique_ptr<device::Backend> replica_backend_;  // CPU, one thread
  std::vector<Replica> replicas_;
  int threads_ = 1;
  // device.graphs: the step's pieces of dense work, replayed from graphs (step_graphs.hpp).
  std::unique_ptr<StepGraphs> graphs_;
  std::vector<std::unique_ptr<comm::Request>> reduces_in_flight_;  // see settle()
  std::uint64_t embedding_buffers_ = 0;  // the embedding's device_buffers_generation() at the last capture check
  std::size_t l2_window_bytes_ = 0;
  std::function<void(Phase)> phase_hook_;
  bool time_phases_ = false;
  double phase_start_ = 0.0;
  std::array<double, num_phases> phase_seconds_{};
  std::int64_t timed_steps_ = 0;
  std::vector<mlp::Param> bottom_params_, interaction_params_, top_params_;
  device::Buffer<float> dense_in_, labels_, pooled_, grad_pooled_;
  device::Buffer<float> grad_bottom_, grad_prob_;  // the dense replicas' only (the primary MLPs take theirs in place)
  // The loss on the device: per-sample terms, their block sums and the running total since the
  // last take_loss (mlp::bce_loss_accumulate); the total's pinned read-back; the replicas' host sum.
  device::Buffer<double> loss_terms_, loss_blocks_, loss_total_;
  std::unique_ptr<device::MemoryPool> pinned_pool_;  // host tier: pinned on CUDA
  device::Buffer<double> loss_readback_;
  device::Buffer<int> finite_flag_, finite_readback_;
  double replica_loss_sum_ = 0;
  std::int64_t loss_samples_ = 0;  // global samples added to the total since the last take_loss
  // Batches go up from pinned memory on device backends, two slots used in turn: a slot is
  // rewritten only after the copies from it, issued two uploads before, have finished (an event).
  struct UploadSlot {
    device::Buffer<float> dense, labels;
    std::unique_ptr<device::Event> copied;
    bool used = false;
  };
  std::array<UploadSlot, 2> uploads_;
  std::int64_t upload_count_ = 0;
};

}  // namespace recmix::runtime
