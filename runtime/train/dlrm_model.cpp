#include "runtime/train/dlrm_model.hpp"

#include <fmt/format.h>

#include <exception>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "device/cpu/host_workers.hpp"

namespace recmix::runtime {
embedding::TableStorage table_storage(const PrecisionSpec& precision) {
  return {precision.embedding, precision.rounding != Rounding::nearest};
}

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "this CPU";
}

}  // namespace

bool bf16_dense(const PrecisionSpec& precision, const device::Backend& backend) {
  if (precision.dense == DensePrecision::fp32 || precision.dense == DensePrecision::tf32) return false;
  if (!device::device_memory_is_host(backend)) return true;
  std::string missing;
  if (!device::cpu_has_avx512_bf16())
    missing = fmt::format("a CPU with AVX512_BF16, which {} lacks (oneDNN would emulate the bf16 GEMMs there, "
                          "slower than fp32)",
                          cpu_model_name());
  else if (backend.gemm_library() != device::GemmLibrary::onednn)
    missing = "the oneDNN GEMM ([device] gemm = \"onednn\" or \"auto\"; OpenBLAS has no bf16 GEMM here)";
  if (missing.empty()) return true;
  if (precision.dense == DensePrecision::automatic) return false;
  throw ConfigError(fmt::format("'precision.dense' = \"bf16\" on the cpu backend needs {}: use \"fp32\", or \"auto\" "
                                "to take bf16 only where it runs natively",
                                missing));
}

namespace {

std::vector<std::int64_t> rows_of(const std::vector<embedding::TableSpec>& tables, int dim) {
  std::vector<std::int64_t> rows;
  for (const auto& t : tables) {
    if (t.dim != dim)
      throw std::invalid_argument(fmt::format("DlrmModel: a table of dim {} in a model of embedding_dim {}", t.dim, dim));
    rows.push_back(t.rows);
  }
  return rows;
}

}  // namespace

DlrmModel::DlrmModel(const JobSpec& spec, const std::vector<embedding::TableSpec>& tables, int num_dense,
                     comm::Communicator& comm, comm::Communicator& device_comm, device::Backend& backend,
                     device::MemoryPool& pool,
                     std::int64_t max_local_batch, const embedding::ShardingPlan& plan,
                     embedding::TierOptions tiers, std::int64_t bag_rows)
    : comm_(comm),
      device_comm_(device_comm),
      backend_(backend),
      stream_(backend.create_stream()),
      table_rows_(rows_of(tables, spec.model.embedding_dim)),
      num_dense_(num_dense),
      dim_(spec.model.embedding_dim),
      max_local_batch_(std::max<std::int64_t>(1, max_local_batch)) {
  const int k = static_cast<int>(tables.size());
  threads_ = backend.num_threads();
  const bool bf16 = bf16_dense(spec.precision, backend);
  // TF32 is the backend's math for every fp32 GEMM of this job, set before the MLPs are made.
  const bool tf32 = spec.precision.dense == DensePrecision::tf32;
  backend.set_fp32_math(tf32 ? device::Fp32Math::tf32 : device::Fp32Math::fp32);
  // The dense replicas run the fp32 fused CPU kernels: not with bf16 or TF32 GEMMs, and sum the
  // MLPs' gradients only: not with the cross network's parameters.
  const bool cross = spec.model.interaction == mlp::InteractionKind::dcn;
  if (cross && spec.device.dense_replicas == DenseReplicas::on)
    throw ConfigError("device.dense_replicas = \"on\" does not apply to model.interaction = \"dcn\" (the replicas "
                      "sum the MLPs' gradients only): use \"auto\" or \"off\"");
  const bool use_replicas =
      !bf16 && !tf32 && !cross && device::device_memory_is_host(backend) && threads_ > 1 &&
      max_local_batch_ >= threads_ &&
      (spec.device.dense_replicas == DenseReplicas::on ||
       (spec.device.dense_replicas == DenseReplicas::automatic && comm.size() == 1 &&
        max_local_batch_ >= replica_min_rows(backend.gemm_library()) * threads_));
  // With replicas the primary MLPs only hold the parameters and the summed gradients: their own
  // activation buffers are sized for one sample.
  const int max_batch = use_replicas ? 1 : static_cast<int>(max_local_batch_);
  // Parameters are initialised from counter-based streams keyed by the seed, so every rank
  // builds identical MLP replicas and every shard layout the same embedding rows.
  std::vector<int> bottom_sizes = {num_dense};
  bottom_sizes.insert(bottom_sizes.end(), spec.model.bottom_mlp.begin(), spec.model.bottom_mlp.end());
  // DLRM-DCNv2's MLPs start as its reference's (TorchRec's), the original DLRM's as dlrm_s_pytorch's.
  const mlp::MlpInit init = cross ? mlp::MlpInit::torchrec : mlp::MlpInit::dlrm;
  bottom_ = std::make_unique<mlp::Mlp>(backend, pool, "bottom", bottom_sizes, mlp::Activation::relu,
                                       spec.seed * 4 + 1, max_batch, bf16, init);
  interaction_ = mlp::make_interaction(
      spec.model.interaction, backend, pool, k, dim_, max_batch,
      mlp::CrossSpec{spec.model.cross_layers, spec.model.cross_rank, spec.seed * 4, bf16});
  std::vector<int> top_sizes = {interaction_->out_features()};
  top_sizes.insert(top_sizes.end(), spec.model.top_mlp.begin(), spec.model.top_mlp.end());
  top_ = std::make_unique<mlp::Mlp>(backend, pool, "top", top_sizes, mlp::Activation::sigmoid,
                                    spec.seed * 4 + 2, max_batch, bf16, init);

  embedding::SparseOptimizerConfig sparse;
  sparse.kind = spec.optimizer.sparse;
  sparse.lr = spec.optimizer.sparse_lr > 0 ? spec.optimizer.sparse_lr : spec.optimizer.lr;
  if (spec.optimizer.eps >= 0) sparse.eps = spec.optimizer.eps;
  sparse.initial_accumulator = spec.optimizer.initial_accumulator;
  embedding_ = std::make_unique<embedding::ShardedEmbedding>(
      comm, backend, pool, tables,
      spec.model.pooling, plan, sparse,
      spec.seed * 4 + 3, &device_comm, std::move(tiers), table_storage(spec.precision));
  embedding_->reserve(*stream_, static_cast<int>(max_local_batch_), spec.train.batch_size, bag_rows);

  // The rows the lookups read most kept in the GPU's persisting L2 (device.l2_window; auto: on
  // wherever the backend has such a cache).
  if (spec.device.l2_window == AutoSwitch::on && !backend.has_l2_window())
    throw ConfigError(fmt::format("device.l2_window = true: the {} backend has no L2 window (cuda has one, cpu-strict "
                                  "emulates it)",
                                  to_string(backend.kind())));
  if (spec.device.l2_window != AutoSwitch::off) {
    const auto region = embedding_->hot_region();
    if (region.bytes > 0) l2_window_bytes_ = backend.set_l2_window(*stream_, region.ptr, region.bytes);
  }

  bottom_params_ = bottom_->parameters();
  interaction_params_ = interaction_->parameters();
  top_params_ = top_->parameters();
  mlp::DenseOptimizerConfig dense;
  dense.kind = spec.optimizer.dense;
  dense.lr = spec.optimizer.lr;
  if (spec.optimizer.eps >= 0) dense.eps = spec.optimizer.eps;
  dense.initial_accumulator = spec.optimizer.initial_accumulator;
  dense.schedule = spec.optimizer.schedule;
  schedule_ = dense.schedule;
  sparse_lr_ = sparse.lr;
  dense_optimizer_ = mlp::make_dense_optimizer(dense, backend, pool, dense_parameters());
  // (The cross network's parameters take the optimizer's step, and a schedule's rate is read from
  // device memory by the optimizer's kernels: no folding with either.)
  fold_sgd_ = comm.size() == 1 && spec.optimizer.dense == DenseOptimizerKind::sgd && interaction_params_.empty() && !schedule_.active();
  sgd_lr_ = dense.lr;
  if (spec.device.graphs == AutoSwitch::on && !backend.supports_graphs())
    throw ConfigError(fmt::format("device.graphs = true: the {} backend has no graphs (cuda has them, cpu-strict "
                                  "emulates them)",
                                  to_string(backend.kind())));
  // "auto": where the backend says graphs pay (Backend::graphs_by_default: cuda).
  const bool graphs =
      spec.device.graphs == AutoSwitch::on || (spec.device.graphs == AutoSwitch::automatic && backend.graphs_by_default());
  graphs_ = std::make_unique<StepGraphs>(backend, *stream_, graphs && !use_replicas);

  if (use_replicas) make_replicas(spec, pool, k);
  allocate_step_buffers(pool, k);
}

// One CPU backend of one thread, and an MLP replica a thread sharing the primary's parameters.
void DlrmModel::make_replicas(const JobSpec& spec, device::MemoryPool& pool, int k) {
  replica_backend_ = device::make_backend(
      device::BackendKind::cpu, 1,
      backend_.gemm_library() == device::GemmLibrary::onednn ? device::CpuGemm::onednn : device::CpuGemm::openblas);
  const int share = static_cast<int>((max_local_batch_ + threads_ - 1) / threads_);
  for (int r = 0; r < threads_; ++r) {
    Replica rep;
    rep.bottom = std::make_unique<mlp::Mlp>(*bottom_, *replica_backend_, share);
    rep.top = std::make_unique<mlp::Mlp>(*top_, *replica_backend_, share);
    rep.interaction = mlp::make_interaction(spec.model.interaction, *replica_backend_, pool, k, dim_, share);
    rep.stream = replica_backend_->create_stream();
    replicas_.push_back(std::move(rep));
  }
  backend_.set_num_threads(threads_);  // OpenBLAS's thread count is process-wide
}

// The step's own buffers: staged inputs, pooled embeddings and their gradients, the loss, the
// read-backs, and upload slots where the device is not host memory.
void DlrmModel::allocate_step_buffers(device::MemoryPool& pool, int k) {
  device::Backend& backend = backend_;
  dense_in_ = device::Buffer<float>(pool, max_local_batch_ * num_dense_, "dense input");
  labels_ = device::Buffer<float>(pool, max_local_batch_, "labels");
  pooled_ = device::Buffer<float>(pool, max_local_batch_ * k * dim_, "pooled embeddings");
  grad_pooled_ = device::Buffer<float>(pool, max_local_batch_ * k * dim_, "pooled embedding gradients");
  if (!replicas_.empty()) {  // the primary MLPs take theirs in place (Mlp::output_gradient)
    grad_bottom_ = device::Buffer<float>(pool, max_local_batch_ * dim_, "bottom MLP output gradient");
    grad_prob_ = device::Buffer<float>(pool, max_local_batch_, "loss gradient");
  }
  loss_terms_ = device::Buffer<double>(pool, max_local_batch_, "per-sample loss terms");
  loss_blocks_ = device::Buffer<double>(pool, mlp::bce_block_count(max_local_batch_), "loss block sums");
  loss_total_ = device::Buffer<double>(pool, 1, "loss total");
  backend.fill_zero(loss_total_.data(), sizeof(double), *stream_);
  pinned_pool_ = std::make_unique<device::MemoryPool>(backend, device::Tier::host, "model read-back and uploads");
  loss_readback_ = device::Buffer<double>(*pinned_pool_, 1, "loss read-back");
  finite_flag_ = device::Buffer<int>(pool, 1, "non-finite flag");
  finite_readback_ = device::Buffer<int>(*pinned_pool_, 1, "non-finite flag read-back");
  if (!backend.host_accessible(device::Tier::device))
    for (auto& u : uploads_) {
      u.dense = device::Buffer<float>(*pinned_pool_, max_local_batch_ * num_dense_, "dense input upload");
      u.labels = device::Buffer<float>(*pinned_pool_, max_local_batch_, "labels upload");
      u.copied = backend.create_event();
    }
}

std::vector<mlp::Param> DlrmModel::dense_parameters() {
  std::vector<mlp::Param> all = bottom_params_;
  all.insert(all.end(), interaction_params_.begin(), interaction_params_.end());
  all.insert(all.end(), top_params_.begin(), top_params_.end());
  return all;
}

void DlrmModel::start_batch(const data::Batch& batch, bool training) {
  if (batch.size > max_local_batch_)
    throw ConfigError(fmt::format("local batch of {} samples exceeds the model's maximum of {}", batch.size,
                                  max_local_batch_));
  const int tables = batch.packed ? batch.tables : static_cast<int>(batch.offsets.size());
  if (tables != num_tables())
    throw DataError(fmt::format("batch has {} tables but the model has {}", tables, num_tables()));
  upload(batch);
  const int b = static_cast<int>(batch.size);
  // Only a training step takes the plan the previous step prefetched (an evaluation in between
  // leaves it for the step).
  const bool prefetched = training && prefetched_;
  if (training) prefetched_ = false;
  if (batch.packed) {
    const embedding::OneHotRows rows{batch.one_hot, batch.tables};
    if (prefetched)
      embedding_->forward_start_prefetched(*stream_, rows, b, pooled_.data());
    else
      embedding_->forward_start(*stream_, rows, b, pooled_.data());
    return;
  }
  std::vector<embedding::Bags> bags(num_tables());
  for (int t = 0; t < num_tables(); ++t) bags[t] = {batch.offsets[t], batch.indices[t]};
  if (prefetched)
    embedding_->forward_start_prefetched(*stream_, bags, b, pooled_.data());
  else
    embedding_->forward_start(*stream_, bags, b, pooled_.data());
}

void DlrmModel::upload(const data::Batch& batch) {
  const std::size_t dense_bytes = batch.dense.size() * sizeof(float), label_bytes = batch.labels.size() * sizeof(float);
  if (backend_.host_accessible(device::Tier::device)) {
    backend_.copy(dense_in_.data(), batch.dense.data(), dense_bytes, *stream_);
    backend_.copy(labels_.data(), batch.labels.data(), label_bytes, *stream_);
    return;
  }
  UploadSlot& u = uploads_[upload_count_++ % uploads_.size()];
  if (u.used) u.copied->synchronize();  // the copies of two uploads ago: long done, as a rule
  std::memcpy(u.dense.data(), batch.dense.data(), dense_bytes);
  std::memcpy(u.labels.data(), batch.labels.data(), label_bytes);
  backend_.copy(dense_in_.data(), u.dense.data(), dense_bytes, *stream_);
  backend_.copy(labels_.data(), u.labels.data(), label_bytes, *stream_);
  u.copied->record(*stream_);
  u.used = true;
}

double DlrmModel::take_loss() {
  backend_.copy(loss_readback_.data(), loss_total_.data(), sizeof(double), *stream_);
  backend_.fill_zero(loss_total_.data(), sizeof(double), *stream_);
  stream_->synchronize();
  double sums[2] = {loss_readback_[0] + replica_loss_sum_, static_cast<double>(loss_samples_)};
  replica_loss_sum_ = 0;
  loss_samples_ = 0;
  if (comm_.size() > 1) comm_.all_reduce_sum(sums, sums, 2, comm::DataType::f64);
  // Every rank adds its steps' global batch: the ranks' sample counts sum to size x the samples.
  const double samples = sums[1] / comm_.size();
  return samples > 0 ? sums[0] / samples : std::numeric_limits<double>::quiet_NaN();
}

bool DlrmModel::dense_finite() {
  backend_.fill_zero(finite_flag_.data(), sizeof(int), *stream_);
  for (const auto& p : dense_parameters())
    mlp::flag_non_finite(backend_, *stream_, p.value, p.count, finite_flag_.data());
  backend_.copy(finite_readback_.data(), finite_flag_.data(), sizeof(int), *stream_);
  stream_->synchronize();
  return finite_readback_[0] == 0;
}

void DlrmModel::prefetch_next(const data::Batch& next) {
  if (!embedding_->tiered()) return;
  const int b = static_cast<int>(next.size);
  if (next.packed) {
    embedding_->prefetch(embedding::OneHotRows{next.one_hot, next.tables}, b);
  } else if (static_cast<int>(next.offsets.size()) == num_tables()) {
    std::vector<embedding::Bags> bags(num_tables());
    for (int t = 0; t < num_tables(); ++t) bags[t] = {next.offsets[t], next.indices[t]};
    embedding_->prefetch(bags, b);
  } else {  // no batch (a failed read): takes part as a bad one
    embedding_->prefetch(embedding::OneHotRows{{}, -1}, -1);
  }
  prefetched_ = true;
}

const float* DlrmModel::forward(const data::Batch& batch) {
  const int b = static_cast<int>(batch.size);
  start_batch(batch);  // the bottom MLP runs while the embedding lookups travel
  const float* bottom_out = bottom_->forward(*stream_, dense_in_.data(), b);
  embedding_->forward_finish(*stream_);
  const float* z = interaction_->forward(*stream_, bottom_out, pooled_.data(), b);
  return top_->forward(*stream_, z, b);
}

template <class F>
void DlrmModel::on_replicas(const F& body) {
  const int n = static_cast<int>(replicas_.size());
  std::vector<std::exception_ptr> errors(n);
  replica_backend_->set_num_threads(1);  // single-threaded GEMMs, called from n threads at once
  device::cpu::HostWorkers::for_this_thread().run(n, n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) try {
        body(static_cast<int>(r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
  });
  backend_.set_num_threads(threads_);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

std::pair<std::int64_t, int> DlrmModel::replica_rows(int r, int batch) const {
  const std::int64_t n = static_cast<std::int64_t>(replicas_.size());
  const std::int64_t b0 = std::int64_t(batch) * r / n;
  return {b0, static_cast<int>(std::int64_t(batch) * (r + 1) / n - b0)};
}

const float* DlrmModel::replica_forward(int r, std::int64_t b0, int rows) {
  Replica& rep = replicas_[r];
  device::Stream& s = *rep.stream;
  const float* bottom_out = rep.bottom->forward(s, dense_in_.data() + b0 * num_dense_, rows);
  const float* z = rep.interaction->forward(s, bottom_out, pooled_.data() + b0 * num_tables() * dim_, rows);
  return rep.top->forward(s, z, rows);
}

void DlrmModel::train_step_replicas(const data::Batch& batch, std::int64_t global_batch, const data::Batch* next) {
  const int b = static_cast<int>(batch.size), n = static_cast<int>(replicas_.size());
  const int k = num_tables();
  begin_phases();
  start_batch(batch, true);
  if (next) prefetch_next(*next);
  embedding_->forward_finish(*stream_);
  mark(embedding_forward_start);
  std::vector<double> loss_sums(n, 0.0);
  const float scale = 1.0f / static_cast<float>(global_batch);
  on_replicas([&](int r) {
    Replica& rep = replicas_[r];
    device::Stream& s = *rep.stream;
    const auto [b0, m] = replica_rows(r, b);
    const float* prob = replica_forward(r, b0, m);
    if (m > 0) loss_sums[r] = mlp::bce_loss(*replica_backend_, s, prob, labels_.data() + b0, m) * m;
    mlp::bce_loss_backward(*replica_backend_, s, prob, labels_.data() + b0, m, scale, grad_prob_.data() + b0);
    const float* grad_z = rep.top->backward(s, grad_prob_.data() + b0, true);
    rep.interaction->backward(s, grad_z, grad_bottom_.data() + b0 * dim_, grad_pooled_.data() + b0 * k * dim_);
    rep.bottom->backward(s, grad_bottom_.data() + b0 * dim_, false);
    s.synchronize();
  });
  mark(dense_replicas);
  // The gradients of the whole batch: the replicas' sums, in replica order. With SGD on one
  // rank each sum goes straight into the step (value -= lr * gradient, as kernels::SgdStep does),
  // instead of being stored for the optimizer to read back.
  for (auto [primary, replica] : {std::pair{top_.get(), &Replica::top}, std::pair{bottom_.get(), &Replica::bottom}}) {
    float* out = primary->all_grads();
    float* value = primary->all_values();
    const float lr = sgd_lr_;
    std::vector<const float*> parts;
    for (auto& rep : replicas_) parts.push_back(((rep.*replica).get())->all_grads());
    const std::int64_t count = static_cast<std::int64_t>(primary->parameter_count());
    const bool step = fold_sgd_;
    device::cpu::HostWorkers::for_this_thread().run(threads_, count, [&](std::int64_t begin, std::int64_t end) {
      // In blocks, each loop a plain one over the block that the compiler vectorises; every
      // element still sees the same additions in the same order.
      constexpr std::int64_t kBlock = 1024;
      float sum[kBlock];
      for (std::int64_t b0 = begin; b0 < end; b0 += kBlock) {
        const std::int64_t n = std::min(kBlock, end - b0);
        std::copy_n(parts[0] + b0, n, sum);
        for (std::size_t p = 1; p < parts.size(); ++p) {
          const float* __restrict g = parts[p] + b0;
          for (std::int64_t j = 0; j < n; ++j) sum[j] += g[j];
        }
        if (step) {
          float* __restrict v = value + b0;
          for (std::int64_t j = 0; j < n; ++j) v[j] -= lr * sum[j];
        } else {
          std::copy_n(sum, n, out + b0);
        }
      }
    });
  }
  // Several ranks: the summed gradients are all-reduced while the embedding gradients travel.
  std::vector<std::unique_ptr<comm::Request>> pending;
  if (comm_.size() > 1)
    for (mlp::Mlp* primary : {top_.get(), bottom_.get()})
      pending.push_back(device_comm_.iall_reduce_sum(primary->all_grads(), primary->all_grads(), primary->parameter_count(),
                                              comm::DataType::f32, stream_.get()));
  mark(gradient_sum);
  embedding_->backward_start(*stream_, grad_pooled_.data());
  embedding_->backward_finish(*stream_);
  mark(embedding_backward_start);
  for (double l : loss_sums) replica_loss_sum_ += l;  // the replicas run on the host: summed there
  loss_samples_ += global_batch;
  for (auto& r : pending) r->wait();
  finish_dense_step();
}

void DlrmModel::predict(const data::Batch& batch, float* probs) {
  if (!replicas_.empty()) {
    const int b = static_cast<int>(batch.size);
    start_batch(batch);
    embedding_->forward_finish(*stream_);
    on_replicas([&](int r) {
      const auto [b0, m] = replica_rows(r, b);
      const float* prob = replica_forward(r, b0, m);
      replica_backend_->copy(probs + b0, prob, std::size_t(m) * sizeof(float), *replicas_[r].stream);
      replicas_[r].stream->synchronize();
    });
    return;
  }
  const float* prob = forward(batch);
  backend_.copy(probs, prob, batch.size * sizeof(float), *stream_);
  stream_->synchronize();
}

}  // namespace recmix::runtime
