#pragma once
// CPU-tuned versions of the hottest non-GEMM kernels (the dot interaction), with accumulators
// held in AVX2 registers. They do the same multiplies and adds in the same order as the
// portable functors of kernels.hpp and give the same bits; machines without AVX2 (checked at
// run time) get the portable functors. Internal to recmix_mlp.
#include "mlp/kernels.hpp"

namespace recmix::mlp::cpu {

bool vector_kernels_available();

void dot_interaction_forward(const kernels::DotInteractionForward& f, kernels::Index item);
void dot_interaction_backward(const kernels::DotInteractionBackward& f, kernels::Index item);

}  // namespace recmix::mlp::cpu
