// The dot interaction in register blocks: four rows of T (or of the gradient matrix G) against a
// vector of kLanes floats at a time, so that four independent accumulators hide the add latency
// and each loaded vector is used four times. GCC vector types inside target("avx2") functions,
// chosen at run time.
#include "mlp/cpu_kernels.hpp"

#include <atomic>

#include "mlp/cpu_threading.hpp"

namespace recmix::mlp {
namespace {
std::atomic<std::int64_t> parallel_threshold{kDefaultCpuParallelThreshold};
}  // namespace

void set_cpu_parallel_threshold(std::int64_t elements) { parallel_threshold.store(elements); }
std::int64_t cpu_parallel_threshold() { return parallel_threshold.load(); }

}  // namespace recmix::mlp

namespace recmix::mlp::cpu {

using kernels::Index;
using kernels::kLanes;

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define RECMIX_MLP_HAVE_AVX2_PATH 1
#endif

#ifdef RECMIX_MLP_HAVE_AVX2_PATH
namespace {

typedef float LaneVector __attribute__((vector_size(kLanes * sizeof(float))));

__attribute__((target("avx2"))) void forward_avx2(const kernels::DotInteractionForward& f,
                                                  Index item) {
  const int k = f.k, d = f.d, n = k + 1, stride = kernels::round_up_lanes(n);
  // T transposed ([d x stride]); the padding lanes stay zero (the buffer is zeroed once).
  float* __restrict tt = f.scratch + item * stride * d;
  Index s1 = kernels::min_index((item + 1) * kernels::kRowBlock, f.batch);
  for (Index s = item * kernels::kRowBlock; s < s1; ++s) {
    const float* b = f.bottom + s * d;
    const float* e = f.emb + s * k * d;
    float* __restrict o = f.out + s * f.out_cols;
    for (int c = 0; c < d; ++c) {
      o[c] = b[c];
      tt[c * stride] = b[c];
    }
    for (int i = 1; i < n; ++i)
      for (int c = 0; c < d; ++c) tt[c * stride + i] = e[(i - 1) * d + c];
    // Rows i0 .. i0+3 against columns j0 .. j0+kLanes-1; rows past k are clamped and not stored.
    for (int i0 = 1; i0 < n; i0 += 4) {
      const float* t[4];
      for (int r = 0; r < 4; ++r) t[r] = e + ((i0 + r < n ? i0 + r : n - 1) - 1) * d;
      const int i_last = i0 + 3 < n - 1 ? i0 + 3 : n - 1;
      for (int j0 = 0; j0 < i_last; j0 += kLanes) {
        LaneVector acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
        for (int c = 0; c < d; ++c) {
          LaneVector col;
          __builtin_memcpy(&col, tt + c * stride + j0, sizeof col);
          acc0 += t[0][c] * col;
          acc1 += t[1][c] * col;
          acc2 += t[2][c] * col;
          acc3 += t[3][c] * col;
        }
        float lanes[4][kLanes];
        __builtin_memcpy(lanes[0], &acc0, sizeof acc0);
        __builtin_memcpy(lanes[1], &acc1, sizeof acc1);
        __builtin_memcpy(lanes[2], &acc2, sizeof acc2);
        __builtin_memcpy(lanes[3], &acc3, sizeof acc3);
        for (int r = 0; r < 4 && i0 + r < n; ++r) {
          const int i = i0 + r;
          float* z = o + d + i * (i - 1) / 2;
          for (int j = j0; j < i && j < j0 + kLanes; ++j) z[j] = lanes[r][j - j0];
        }
      }
    }
  }
}

__attribute__((target("avx2"))) void backward_avx2(const kernels::DotInteractionBackward& f,
                                                   Index item) {
  const int k = f.k, d = f.d, n = k + 1;
  float* __restrict g_sym = f.scratch + item * n * n;
  Index s1 = kernels::min_index((item + 1) * kernels::kRowBlock, f.batch);
  for (Index s = item * kernels::kRowBlock; s < s1; ++s) {
    const float* b = f.bottom + s * d;
    const float* e = f.emb + s * k * d;
    const float* gx = f.grad_out + s * f.out_cols;
    const float* gz = gx + d;
    kernels::spread_symmetric(gz, n, g_sym);
    for (int i0 = 0; i0 < n; i0 += 4) {
      const float* g[4];
      for (int r = 0; r < 4; ++r) g[r] = g_sym + (i0 + r < n ? i0 + r : n - 1) * n;
      int c0 = 0;
      for (; c0 + kLanes <= d; c0 += kLanes) {
        LaneVector acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {}, t;
        if (i0 == 0) __builtin_memcpy(&acc0, gx + c0, sizeof acc0);
        __builtin_memcpy(&t, b + c0, sizeof t);
        acc0 += g[0][0] * t;
        acc1 += g[1][0] * t;
        acc2 += g[2][0] * t;
        acc3 += g[3][0] * t;
        const float* tj = e + c0;
        for (int j = 1; j < n; ++j, tj += d) {
          __builtin_memcpy(&t, tj, sizeof t);
          acc0 += g[0][j] * t;
          acc1 += g[1][j] * t;
          acc2 += g[2][j] * t;
          acc3 += g[3][j] * t;
        }
        const LaneVector* accs[4] = {&acc0, &acc1, &acc2, &acc3};
        for (int r = 0; r < 4 && i0 + r < n; ++r) {
          const int i = i0 + r;
          float* gi = i == 0 ? f.grad_bottom + s * d : f.grad_emb + (s * k + i - 1) * d;
          __builtin_memcpy(gi + c0, accs[r], sizeof(LaneVector));
        }
      }
      for (int r = 0; r < 4 && i0 + r < n; ++r)  // components past the last full vector
        f.row_gradient(i0 + r, c0, s, b, e, gx, g[r]);
    }
  }
}

}  // namespace

bool vector_kernels_available() {
  static const bool available = __builtin_cpu_supports("avx2");
  return available;
}

void dot_interaction_forward(const kernels::DotInteractionForward& f, Index item) {
  if (vector_kernels_available())
    forward_avx2(f, item);
  else
    f(item);
}

void dot_interaction_backward(const kernels::DotInteractionBackward& f, Index item) {
  if (vector_kernels_available())
    backward_avx2(f, item);
  else
    f(item);
}

#else

bool vector_kernels_available() { return false; }
void dot_interaction_forward(const kernels::DotInteractionForward& f, Index item) { f(item); }
void dot_interaction_backward(const kernels::DotInteractionBackward& f, Index item) { f(item); }

#endif

}  // namespace recmix::mlp::cpu
