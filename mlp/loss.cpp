// BCE loss: terms in double; on the CPU summed in index order, on CUDA summed on the host after
// one copy of the per-sample terms.
#include "mlp/loss.hpp"

#include <fmt/format.h>

#include <vector>

#include "core/error.hpp"
#include "mlp/launch.hpp"

namespace recmix::mlp {
namespace {
void check_batch(int batch) {
  if (batch < 0) throw ConfigError(fmt::format("bce loss: batch {} is negative", batch));
}
}  // namespace

double bce_loss(device::Backend& backend, device::Stream& s, const float* prob, const float* labels,
                int batch) {
  check_batch(batch);
  if (batch == 0) return 0.0;
  double sum = 0.0;
  if (device::device_memory_is_host(backend)) {
    s.synchronize();
    for (int i = 0; i < batch; ++i) sum += kernels::bce_term(prob[i], labels[i]);
    return sum / batch;
  }
  const std::size_t bytes = sizeof(double) * static_cast<std::size_t>(batch);
  auto* terms = static_cast<double*>(backend.allocate(bytes, device::Tier::device));
  std::vector<double> host(static_cast<std::size_t>(batch));
  try {
    detail::launch(backend, s, batch, kernels::BceTerms{prob, labels, terms}, batch);
    backend.copy(host.data(), terms, bytes, s);
    s.synchronize();
  } catch (...) {
    backend.deallocate(terms, device::Tier::device);
    throw;
  }
  backend.deallocate(terms, device::Tier::device);
  for (double t : host) sum += t;
  return sum / batch;
}

std::int64_t bce_block_count(std::int64_t batch) { return (batch + kernels::kLossBlock - 1) / kernels::kLossBlock; }

void bce_loss_accumulate(device::Backend& backend, device::Stream& s, const float* prob, const float* labels,
                         int batch, double* terms, double* block_sums, double* device_total, float* grad_prob,
                         float scale) {
  check_batch(batch);
  if (batch == 0) return;
  const std::int64_t blocks = bce_block_count(batch);
  detail::launch(backend, s, batch, kernels::BceTerms{prob, labels, terms, grad_prob, scale}, batch);
  detail::launch(backend, s, blocks, kernels::BlockSums{terms, batch, block_sums}, batch);
  detail::launch(backend, s, 1, kernels::AddBlockSums{block_sums, blocks, device_total}, 1);
}

void flag_non_finite(device::Backend& backend, device::Stream& s, const float* v, std::int64_t n, int* flag) {
  detail::launch(backend, s, n, kernels::FlagNonFinite{v, flag}, n);
}

void bce_loss_backward(device::Backend& backend, device::Stream& s, const float* prob,
                       const float* labels, int batch, float scale, float* grad_prob) {
  check_batch(batch);
  kernels::BceBackward f{prob, labels, grad_prob, scale};
  detail::launch(backend, s, batch, f, batch);
}

}  // namespace recmix::mlp
