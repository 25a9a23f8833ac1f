#pragma once
// Linear-layer GEMMs for the CPU backend with the element-wise work folded into the GEMM's last
// pass over the output: y = act(x W^T + b) in the forward pass, and in the backward pass
// dx = dz W masked by the previous layer's ReLU with that layer's bias gradient (the column sums)
// taken on the way. OpenBLAS needs a pass to zero C (beta = 0), its GEMM, then a pass of ours
// over C; here each output tile is written once, from registers. (bench/RESULTS.md has the
// figures.) Internal to recmix_mlp.
//
// Register tiles of 6 rows x 16 columns (12 AVX2 accumulators, FMA), the weights packed into
// 16-column panels, the K dimension in blocks of 256. The columns are split over threads and
// each column is computed the same way whatever the thread count, so results do not depend on it.
#include <cstddef>

#include "device/types.hpp"
#include "mlp/types.hpp"

namespace recmix::mlp::cpu {

// True where these kernels run: an x86-64 GCC build on a CPU with AVX2 and FMA.
bool fused_linear_available();

// Whether Mlp uses them where available (default true). Process-wide; benchmarks turn them off
// to time the OpenBLAS path in the same run, tests to compare the two.
void set_fused_linear_enabled(bool enabled);
bool fused_linear_enabled();

// Where these kernels beat the backend's GEMM followed by a separate element-wise pass
// (bench_linear in bench/RESULTS.md: one thread, 1024 rows, caches flushed between calls):
// - OpenBLAS: the forward GEMM of a layer with at most 64 inputs or outputs, and the
//   input-gradient GEMM of a layer with at most 16 outputs. On the wide layers OpenBLAS's GEMM,
//   which also packs the input, is faster from a cold cache by more than the pass it saves.
// - oneDNN (AVX-512): nowhere. Its SGEMM runs the wider layers 1.5-1.9x as fast as these AVX2
//   kernels; on the layers with 16 outputs or fewer they are still faster one call at a time,
//   but the whole training step was no faster with them there (bench_train_step
//   --compare-unfused at batches 64, 128 and 2048: with / without 0.98-1.14, inside the noise).
bool fused_forward_pays(int in, int out, device::GemmLibrary gemm);
bool fused_input_gradient_pays(int in, int out, device::GemmLibrary gemm);

// Floats of packing scratch that linear_forward and linear_backward_input need for a layer
// [out x in]. In both, in and out are at least 1 (Mlp's layers are); rows may be 0.
std::size_t linear_pack_floats(int in, int out);

// y = act(x W^T + b): x [rows x in] with row stride ldx, W [out x in], b [out], y [rows x out].
// act is applied element-wise, as kernels::activate.
void linear_forward(int threads, int rows, int in, int out, const float* x, int ldx, const float* w,
                    const float* b, Activation act, float* y, float* pack);

// dx = dz W: dz [rows x out], W [out x in], dx [rows x in]. With relu_output (the output of the
// ReLU that produced this layer's input, [rows x in]) dx becomes the gradient w.r.t. that ReLU's
// input: dx[r][c] = 0 where relu_output[r][c] <= 0, and column_sums[c] = the sum of dx[r][c]
// over r (the previous layer's bias gradient): rows in order within blocks of 36, then the blocks
// in order. column_sums may be null without a mask.
void linear_backward_input(int threads, int rows, int in, int out, const float* dz, const float* w,
                           const float* relu_output, float* column_sums, float* dx, float* pack);

}  // namespace recmix::mlp::cpu
