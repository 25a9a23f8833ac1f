#pragma once
// The bf16 GEMMs' operand rounding on the CPU backend, 16 elements a vector where the CPU has
// AVX-512 (core/half_avx512.hpp; every CPU that runs bf16 GEMMs natively has it): the same bits
// as half::float_to_bf16, element for element. The bias + activation forward and the activation
// backward run their portable functors (kernels.hpp) and round the block they wrote here, while
// it is still in cache; so do the cross network's two passes (cross_kernels.hpp). `vectorised` =
// false runs the scalar routine, so that tests hold both paths against each other. Internal to
// recmix_mlp.
#include <cstdint>

#include "mlp/cross_kernels.hpp"
#include "mlp/kernels.hpp"

namespace recmix::mlp::cpu {

// Whether this CPU runs the vectorised rounding (checked once).
bool bf16_rounding_vectorised();

// dst[i] = half::float_to_bf16(src[i]), i < n.
void round_to_bf16(const float* src, std::uint16_t* dst, std::int64_t n, bool vectorised = bf16_rounding_vectorised());

// f(item), its bf16 output written by round_to_bf16: the bias + activation pass's y16 and the
// activation backward's dz16 after the block's rows are done, RoundToBf16's whole block.
void run_rounded(const kernels::BiasActivationForward& f, kernels::Index item,
                 bool vectorised = bf16_rounding_vectorised());
void run_rounded(const kernels::ActivationBackward& f, kernels::Index item, bool vectorised = bf16_rounding_vectorised());
void run_rounded(const kernels::RoundToBf16& f, kernels::Index item, bool vectorised = bf16_rounding_vectorised());
// The cross network's (mlp/cross_kernels.hpp): CrossCombine's x_next16 and CrossGradient's dv16.
void run_rounded(const kernels::CrossCombine& f, kernels::Index item, bool vectorised = bf16_rounding_vectorised());
void run_rounded(const kernels::CrossGradient& f, kernels::Index item, bool vectorised = bf16_rounding_vectorised());

}  // namespace recmix::mlp::cpu
