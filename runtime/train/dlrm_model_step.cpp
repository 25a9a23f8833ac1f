// The training step of DlrmModel on one device (the CPU backend's dense replicas are in
// dlrm_model.cpp): its pieces, replayed from graphs where device.graphs is on (StepGraphs); the
// dense gradients' all-reduces and how the host settles them; the phase timing of
// bench_train_step.
#include <array>
#include <chrono>
#include <functional>

#include "runtime/train/dlrm_model.hpp"

namespace recmix::runtime {
namespace {

// The pieces of a step that device.graphs replays (StepGraphs).
enum StepPiece : int {
  kBottomForward,
  kBottomForwardPooling,  // with the embedding's forward_finish (ShardedEmbedding::forward_finish_capturable)
  kDenseMiddle,
  kInteractionBackward,
  kBottomBackward,
  kOptimizerStep,
  kEmbeddingUpdate
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string_view DlrmModel::phase_name(int phase) {
  static constexpr std::array<std::string_view, num_phases> names = {
      "embedding forward (send, pool)", "bottom MLP forward", "embedding forward (receive)",
      "interaction forward", "top MLP forward", "loss", "top MLP backward", "interaction backward",
      "embedding backward (send)", "bottom MLP backward", "embedding backward (update)",
      "dense update / all-reduce wait", "dense half, replicas on threads", "replica gradient sum"};
  return phase >= 0 && phase < num_phases ? names[phase] : "?";
}

void DlrmModel::set_phase_timing(bool on) {
  time_phases_ = on;
  phase_seconds_.fill(0.0);
  timed_steps_ = 0;
}

void DlrmModel::mark(Phase phase) {
  if (phase_hook_) phase_hook_(phase);
  if (!time_phases_) return;
  stream_->synchronize();
  const double t = now_seconds();
  phase_seconds_[phase] += t - phase_start_;
  phase_start_ = t;
}

void DlrmModel::finish_dense_step(bool issued) {
  if (!fold_sgd_ && !issued)  // else the step was taken already: counted only
    graphs_->run(kOptimizerStep, 0, 0, [&] {
      dense_optimizer_->issue_step(*stream_);
      return nullptr;
    });
  dense_optimizer_->count_step();
  mark(dense_update);
  if (time_phases_) ++timed_steps_;
}

void DlrmModel::begin_phases() {
  if (time_phases_) phase_start_ = now_seconds();
}

void DlrmModel::train_step_async(const data::Batch& batch, std::int64_t global_batch, const data::Batch* next) {
  // The steps taken so far (restored with a checkpoint) key the tables' stochastic rounding.
  embedding_->set_step(dense_optimizer_->step_count());
  if (schedule_.active())  // the host's rate for the sparse updates (the dense one is computed on the device)
    embedding_->set_learning_rate(sparse_lr_ * schedule_.scale(dense_optimizer_->step_count() + 1));
  if (!replicas_.empty()) return train_step_replicas(batch, global_batch, next);
  const int b = static_cast<int>(batch.size);
  begin_phases();
  start_batch(batch, true);  // the bottom MLP runs while the embedding lookups travel
  if (next) prefetch_next(*next);  // and the next batch's cold rows are gathered
  mark(embedding_forward_start);
  // Where the embedding's forward_finish is device work alone (one rank, one-hot batches, whole
  // tables: the owner CSR and the pooling), it joins the bottom MLP's forward piece.
  const bool pool_in_piece = graphs_->on() && embedding_->forward_finish_capturable();
  if (pool_in_piece) forget_stale_embedding_pieces();
  const float* bottom_out = graphs_->run(pool_in_piece ? kBottomForwardPooling : kBottomForward, b, global_batch, [&] {
    const float* out = bottom_->forward(*stream_, dense_in_.data(), b);
    if (pool_in_piece) embedding_->forward_finish(*stream_);
    return out;
  });
  mark(bottom_forward);
  if (!pool_in_piece)
    embedding_->forward_finish(*stream_);
  else if (!graphs_->issued())
    embedding_->forward_finish_replayed();
  mark(embedding_forward_finish);
  std::vector<std::unique_ptr<comm::Request>> pending;
  const bool reduce = comm_.size() > 1;
  // The device communicator orders each all-reduce after the gradients on the stream (NCCL), or
  // the work has run by now (the CPU backends): no synchronisation here. Where it captures
  // collectives (NCCL; the staged one under the emulator), each all-reduce is issued inside the
  // piece that made its gradients, so that replays run it in the piece's graph.
  const bool in_graphs = graphs_->on() && device_comm_.captures_on_stream();
  auto all_reduce = [&](auto& layer) {
    pending.push_back(device_comm_.iall_reduce_sum(layer.all_grads(), layer.all_grads(), layer.parameter_count(),
                                                   comm::DataType::f32, stream_.get()));
  };
  const std::function<void()> reduce_top = [&] { all_reduce(*top_); };
  const float* grad_z = dense_middle(bottom_out, b, global_batch, reduce && in_graphs ? reduce_top : nullptr);
  loss_samples_ += global_batch;
  if (reduce && !in_graphs) reduce_top();
  mark(top_backward);
  const bool reduce_interaction = reduce && interaction_->parameter_count() > 0;
  graphs_->run(kInteractionBackward, b, global_batch, [&] {
    interaction_->backward(*stream_, grad_z, bottom_->output_gradient(), grad_pooled_.data());
    if (reduce_interaction && in_graphs) all_reduce(*interaction_);
    return nullptr;
  });
  if (reduce_interaction && !in_graphs) all_reduce(*interaction_);
  mark(interaction_backward);
  // The embedding gradients travel to their owners while the bottom MLP's backward runs.
  start_embedding_backward(b, global_batch);
  mark(embedding_backward_start);
  // The dense optimizer's step joins the bottom MLP's backward piece where the host has nothing to
  // do between them: graphs on, the step not folded into the backward, and every all-reduce
  // before it on the stream, inside the pieces. One graph launch a step fewer.
  const bool step_in_piece = graphs_->on() && !fold_sgd_ && (!reduce || in_graphs);
  graphs_->run(kBottomBackward, b, global_batch, [&] {
    float* grad_out = bottom_->output_gradient();
    const float* out = fold_sgd_ ? bottom_->backward_sgd(*stream_, grad_out, false, sgd_lr_)
                                 : bottom_->backward(*stream_, grad_out, false);
    if (reduce && in_graphs) all_reduce(*bottom_);
    if (step_in_piece) dense_optimizer_->issue_step(*stream_);
    return out;
  });
  if (reduce && !in_graphs) all_reduce(*bottom_);
  mark(bottom_backward);
  embedding_->backward_finish(*stream_);
  mark(embedding_backward_finish);
  settle(pending);
  finish_dense_step(step_in_piece);
}

void DlrmModel::settle(std::vector<std::unique_ptr<comm::Request>>& reduces) {
  if (!device_comm_.orders_on_stream()) {
    for (auto& r : reduces) r->wait();
    return;
  }
  // NCCL orders the all-reduces on the stream, before the optimizer's step: the host does not
  // wait. A request lives until it has completed (one destroyed before would wait for it).
  for (auto& r : reduces) reduces_in_flight_.push_back(std::move(r));
  std::erase_if(reduces_in_flight_, [](const std::unique_ptr<comm::Request>& r) { return r->test(); });
}

void DlrmModel::forget_stale_embedding_pieces() {
  if (const std::uint64_t made = embedding_->device_buffers_generation(); made != embedding_buffers_) {
    graphs_->forget(kBottomForwardPooling);
    graphs_->forget(kEmbeddingUpdate);
    embedding_buffers_ = made;
  }
}

// One rank with whole untiered fp32 tables on a device and one-hot batches: the sparse update
// (the grouping's sort and the row updates) is device work alone, captured and replayed as a
// piece. Its graphs are dropped when the embedding makes a buffer they read anew.
void DlrmModel::start_embedding_backward(int b, std::int64_t global_batch) {
  if (!graphs_->on() || !embedding_->backward_capturable())
    return embedding_->backward_start(*stream_, grad_pooled_.data());
  forget_stale_embedding_pieces();
  graphs_->run(kEmbeddingUpdate, b, global_batch, [&]() -> const float* {
    embedding_->backward_start(*stream_, grad_pooled_.data());
    return nullptr;
  });
  if (!graphs_->issued()) embedding_->backward_start_replayed();
}

const float* DlrmModel::dense_middle(const float* bottom_out, int b, std::int64_t global_batch,
                                     const std::function<void()>& then) {
  // Phases are timed (a host wait each) only on eager steps: a replay is one piece of work.
  auto phase = [&](Phase p) {
    if (!graphs_->on()) mark(p);
  };
  return graphs_->run(kDenseMiddle, b, global_batch, [&] {
    const float* z = interaction_->forward(*stream_, bottom_out, pooled_.data(), b);
    phase(interaction_forward);
    const float* prob = top_->forward(*stream_, z, b);
    phase(top_forward);
    // The loss's terms and its gradient in one pass, the gradient where the top MLP's backward
    // takes it (no copy). Each rank scales by the global batch, so summing gradients over ranks
    // gives the gradient of the global mean loss, exactly as one rank holding the whole batch
    // computes it.
    float* grad_prob = top_->output_gradient();
    mlp::bce_loss_accumulate(backend_, *stream_, prob, labels_.data(), b, loss_terms_.data(), loss_blocks_.data(),
                             loss_total_.data(), grad_prob, 1.0f / static_cast<float>(global_batch));
    phase(loss);
    const float* grad_z = fold_sgd_ ? top_->backward_sgd(*stream_, grad_prob, true, sgd_lr_)
                                    : top_->backward(*stream_, grad_prob, true);
    if (then) then();
    return grad_z;
  });
}

}  // namespace recmix::runtime
