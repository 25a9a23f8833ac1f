#pragma once
// Binary cross-entropy on probabilities, as torch.nn.BCELoss: each log term clamped at -100,
// mean over the batch; labels are floats in [0, 1] (soft labels allowed).
#include "device/backend.hpp"

namespace recmix::mlp {

// Mean loss over the batch, accumulated in double; 0 for an empty batch.
double bce_loss(device::Backend& backend, device::Stream& s, const float* prob, const float* labels,
                int batch);

// grad_prob[i] = scale * (p_i - y_i) / max(p_i (1 - p_i), 1e-12): the gradient of the summed loss
// times scale (1/global_batch gives the gradient of the mean). grad_prob must not alias the inputs.
void bce_loss_backward(device::Backend& backend, device::Stream& s, const float* prob,
                       const float* labels, int batch, float scale, float* grad_prob);

}  // namespace recmix::mlp
