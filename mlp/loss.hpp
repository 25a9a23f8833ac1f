#pragma once
// Binary cross-entropy on probabilities, as torch.nn.BCELoss: each log term clamped at -100,
// mean over the batch; labels are floats in [0, 1] (soft labels allowed).
#include "device/backend.hpp"

namespace recmix::mlp {

// Mean loss over the batch, accumulated in double; 0 for an empty batch. Waits for the stream, and
// on device backends allocates a buffer for the terms: for tests and tools (a training step uses
// bce_loss_accumulate).
double bce_loss(device::Backend& backend, device::Stream& s, const float* prob, const float* labels,
                int batch);

// Adds the batch's summed loss terms to *device_total (one double in device memory) without a host
// wait, summed in the same fixed order on every backend (kernels::BlockSums, AddBlockSums).
// terms (batch doubles) and block_sums (bce_block_count(batch) doubles) are the caller's scratch.
// With grad_prob set, the pass over the terms also writes bce_loss_backward(scale, grad_prob)'s
// gradient, the same values in one launch fewer.
void bce_loss_accumulate(device::Backend& backend, device::Stream& s, const float* prob, const float* labels,
                         int batch, double* terms, double* block_sums, double* device_total,
                         float* grad_prob = nullptr, float scale = 1.f);
std::int64_t bce_block_count(std::int64_t batch);

// *flag = 1 (device memory) when one of v[0, n) is NaN or infinite; left as it is otherwise.
void flag_non_finite(device::Backend& backend, device::Stream& s, const float* v, std::int64_t n, int* flag);

// grad_prob[i] = scale * (p_i - y_i) / max(p_i (1 - p_i), 1e-12): the gradient of the summed loss
// times scale (1/global_batch gives the gradient of the mean). grad_prob must not alias the inputs.
void bce_loss_backward(device::Backend& backend, device::Stream& s, const float* prob,
                       const float* labels, int batch, float scale, float* grad_prob);

}  // namespace recmix::mlp
