// Linear-layer GEMMs with fused element-wise work (mlp/cpu/linear.hpp). The loop nest, outermost
// first: a thread's share of the 16-column panels (packed once per call), blocks of 16 panels
// (256 columns, whose packed weights stay in L2), blocks of 256 along K, the rows six at a time
// (their 6 x 256 slice of the input stays in L1), then the panels of the block. Each 6 x 16 tile
// is accumulated in registers; the epilogue adds the earlier K blocks and writes the output once,
// from the registers for a full tile, through a small aligned buffer for the last, narrower
// panel of a width that is not a multiple of 16.
#include "mlp/cpu/linear.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>

#include "device/cpu/host_workers.hpp"
#include "mlp/kernels.hpp"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define RECMIX_MLP_HAVE_FUSED_LINEAR 1
#include <immintrin.h>
#endif

namespace recmix::mlp::cpu {
namespace {

constexpr int kMr = 6;    // rows of a register tile
constexpr int kNr = 16;   // columns of a register tile (two AVX2 vectors)
constexpr int kKc = 256;  // K block
constexpr int kPanelsPerBlock = 16;
// The column sums of the input gradient add rows into a partial sum per block of this many rows
// (a multiple of kMr), then the blocks in order: the rounding error grows with the number of
// blocks, not of rows.
constexpr int kSumRows = 36;
// Multiply-adds under which a call stays on the calling thread (waking a helper costs tens of
// microseconds).
constexpr std::int64_t kParallelMacs = std::int64_t(1) << 21;

int panels_of(int n) { return (n + kNr - 1) / kNr; }

std::atomic<bool> fused_enabled{true};

}  // namespace

void set_fused_linear_enabled(bool enabled) { fused_enabled.store(enabled); }
bool fused_linear_enabled() { return fused_enabled.load(std::memory_order_relaxed); }

bool fused_forward_pays(int in, int out, device::GemmLibrary gemm) {
  return gemm == device::GemmLibrary::openblas && std::min(in, out) <= 64;
}
bool fused_input_gradient_pays(int, int out, device::GemmLibrary gemm) {
  return gemm == device::GemmLibrary::openblas && out <= 16;
}

std::size_t linear_pack_floats(int in, int out) {
  const std::size_t forward = std::size_t(panels_of(out)) * kNr * in;
  const std::size_t backward = std::size_t(panels_of(in)) * kNr * (out + 1);  // + partial column sums
  return std::max(forward, backward);
}

#ifdef RECMIX_MLP_HAVE_FUSED_LINEAR
namespace {

// Where a tile goes: rows [r0, r0 + mr), columns [c0, c0 + nc) of the output; whether its K block
// is the first (the output holds nothing yet) and the last (the epilogue applies).
struct TileAt {
  int r0, mr, c0, nc;
  bool first, last;
};

// The forward epilogue: y = act(y_so_far + tile + b) on the last K block, y_so_far + tile before.
template <Activation kAct>
struct ForwardOut {
  float* y;
  int ld;
  const float* bias;

  // Row r of a full tile, from registers.
  __attribute__((target("avx2,fma"), always_inline)) inline void row(const TileAt& at, int r, __m256 v0,
                                                                    __m256 v1) const {
    float* yr = y + std::ptrdiff_t(at.r0 + r) * ld + at.c0;
    if (!at.first) {
      v0 = _mm256_add_ps(_mm256_loadu_ps(yr), v0);
      v1 = _mm256_add_ps(_mm256_loadu_ps(yr + 8), v1);
    }
    if (at.last) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(bias + at.c0));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(bias + at.c0 + 8));
      if constexpr (kAct == Activation::relu) {  // v > 0 ? v : 0 (max_ps gives the second operand for NaN)
        v0 = _mm256_max_ps(v0, _mm256_setzero_ps());
        v1 = _mm256_max_ps(v1, _mm256_setzero_ps());
      } else if constexpr (kAct == Activation::sigmoid) {
        alignas(32) float t[kNr];
        _mm256_store_ps(t, v0);
        _mm256_store_ps(t + 8, v1);
        for (int j = 0; j < kNr; ++j) t[j] = kernels::sigmoid(t[j]);
        v0 = _mm256_load_ps(t);
        v1 = _mm256_load_ps(t + 8);
      }
    }
    _mm256_storeu_ps(yr, v0);
    _mm256_storeu_ps(yr + 8, v1);
  }
  void finish(const TileAt&) const {}
  // A tile with fewer than 16 columns, from the tile buffer.
  __attribute__((target("avx2,fma"))) void partial(const TileAt& at, const float* tile) const {
    for (int r = 0; r < at.mr; ++r) {
      float* yr = y + std::ptrdiff_t(at.r0 + r) * ld + at.c0;
      for (int j = 0; j < at.nc; ++j) {
        const float v = at.first ? tile[r * kNr + j] : yr[j] + tile[r * kNr + j];
        yr[j] = at.last ? kernels::activate(v + bias[at.c0 + j], kAct) : v;
      }
    }
  }
};

// The input-gradient epilogue: dx = dx_so_far + tile; on the last K block, with a mask, dx = 0
// where mask <= 0, and the column sums take dx row by row (through the block sums `block`).
struct BackwardOut {
  float* dx;
  int ld;
  const float* mask;
  float* column_sums;
  float* block;
  int rows;

  // After the tile's rows: a finished block of kSumRows rows (or the last rows) goes into the sums.
  void finish(const TileAt& at) const {
    const int end = at.r0 + at.mr;
    if (!at.last || !mask || (end % kSumRows != 0 && end != rows)) return;
    for (int j = 0; j < at.nc; ++j) {
      column_sums[at.c0 + j] += block[at.c0 + j];
      block[at.c0 + j] = 0.f;
    }
  }

  __attribute__((target("avx2,fma"), always_inline)) inline void row(const TileAt& at, int r, __m256 v0,
                                                                    __m256 v1) const {
    const std::ptrdiff_t at_row = std::ptrdiff_t(at.r0 + r) * ld + at.c0;
    float* d = dx + at_row;
    if (!at.first) {
      v0 = _mm256_add_ps(_mm256_loadu_ps(d), v0);
      v1 = _mm256_add_ps(_mm256_loadu_ps(d + 8), v1);
    }
    if (at.last && mask) {
      const __m256 zero = _mm256_setzero_ps();
      v0 = _mm256_and_ps(v0, _mm256_cmp_ps(_mm256_loadu_ps(mask + at_row), zero, _CMP_GT_OQ));
      v1 = _mm256_and_ps(v1, _mm256_cmp_ps(_mm256_loadu_ps(mask + at_row + 8), zero, _CMP_GT_OQ));
      float* s = block + at.c0;
      _mm256_storeu_ps(s, _mm256_add_ps(_mm256_loadu_ps(s), v0));
      _mm256_storeu_ps(s + 8, _mm256_add_ps(_mm256_loadu_ps(s + 8), v1));
    }
    _mm256_storeu_ps(d, v0);
    _mm256_storeu_ps(d + 8, v1);
  }
  __attribute__((target("avx2,fma"))) void partial(const TileAt& at, const float* tile) const {
    for (int r = 0; r < at.mr; ++r) {
      const std::ptrdiff_t at_row = std::ptrdiff_t(at.r0 + r) * ld + at.c0;
      for (int j = 0; j < at.nc; ++j) {
        float v = at.first ? tile[r * kNr + j] : dx[at_row + j] + tile[r * kNr + j];
        if (at.last && mask) {
          v = mask[at_row + j] > 0.f ? v : 0.f;
          block[at.c0 + j] += v;
        }
        dx[at_row + j] = v;
      }
    }
  }
};

// One tile: the sum over k < kc of a[r * lda + k] * b[k][0..15] for the tile's rows r < MR (b
// packed sixteen columns to a k), accumulated in registers, then handed to the epilogue.
template <int MR, class Out>
__attribute__((target("avx2,fma"), always_inline)) inline void tile_product(int kc, const float* a,
                                                                           std::ptrdiff_t lda, const float* b,
                                                                           const TileAt& at, const Out& out) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float* a0 = a;
  const float* a1 = MR > 1 ? a + lda : a;
  const float* a2 = MR > 2 ? a + 2 * lda : a;
  const float* a3 = MR > 3 ? a + 3 * lda : a;
  const float* a4 = MR > 4 ? a + 4 * lda : a;
  const float* a5 = MR > 5 ? a + 5 * lda : a;
  for (int k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * kNr), b1 = _mm256_loadu_ps(b + k * kNr + 8);
    __m256 av;
#define RECMIX_TILE_ROW(i)                         \
  if constexpr (MR > i) {                          \
    av = _mm256_broadcast_ss(a##i + k);            \
    c##i##0 = _mm256_fmadd_ps(av, b0, c##i##0);    \
    c##i##1 = _mm256_fmadd_ps(av, b1, c##i##1);    \
  }
    RECMIX_TILE_ROW(0) RECMIX_TILE_ROW(1) RECMIX_TILE_ROW(2)
    RECMIX_TILE_ROW(3) RECMIX_TILE_ROW(4) RECMIX_TILE_ROW(5)
#undef RECMIX_TILE_ROW
  }
  if (at.nc == kNr) {
    out.row(at, 0, c00, c01);
    if constexpr (MR > 1) out.row(at, 1, c10, c11);
    if constexpr (MR > 2) out.row(at, 2, c20, c21);
    if constexpr (MR > 3) out.row(at, 3, c30, c31);
    if constexpr (MR > 4) out.row(at, 4, c40, c41);
    if constexpr (MR > 5) out.row(at, 5, c50, c51);
    out.finish(at);
    return;
  }
  alignas(32) float tile[kMr * kNr];
  const __m256 rows[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int r = 0; r < MR; ++r) {
    _mm256_store_ps(tile + r * kNr, rows[r][0]);
    _mm256_store_ps(tile + r * kNr + 8, rows[r][1]);
  }
  out.partial(at, tile);
  out.finish(at);
}

template <class Out>
__attribute__((target("avx2,fma"))) void tile_product(int kc, const float* a, std::ptrdiff_t lda, const float* b,
                                                      const TileAt& at, const Out& out) {
  switch (at.mr) {
    case 6: tile_product<6>(kc, a, lda, b, at, out); break;
    case 5: tile_product<5>(kc, a, lda, b, at, out); break;
    case 4: tile_product<4>(kc, a, lda, b, at, out); break;
    case 3: tile_product<3>(kc, a, lda, b, at, out); break;
    case 2: tile_product<2>(kc, a, lda, b, at, out); break;
    default: tile_product<1>(kc, a, lda, b, at, out); break;
  }
}

// The GEMM [rows x n] = A [rows x k] B, B packed by pack_panel(p, dst) into 16-column panels
// ([k][16] each, zero past n), each finished tile handed to `out`. Panels are split over threads;
// begin(p0, p1) runs on a thread before its panels are computed.
template <class Pack, class Begin, class Out>
void panel_gemm(int threads, int rows, int n, int k, const float* a, std::ptrdiff_t lda, float* pack,
                const Pack& pack_panel, const Begin& begin, const Out& out) {
  const int panels = panels_of(n);
  auto body = [&](std::int64_t p_begin, std::int64_t p_end) {
    for (std::int64_t p = p_begin; p < p_end; ++p) pack_panel(static_cast<int>(p), pack + p * kNr * k);
    begin(static_cast<int>(p_begin), static_cast<int>(p_end));
    for (std::int64_t pb = p_begin; pb < p_end; pb += kPanelsPerBlock) {
      const std::int64_t pe = std::min<std::int64_t>(pb + kPanelsPerBlock, p_end);
      for (int kb = 0; kb < k; kb += kKc) {
        const int kc = std::min(kKc, k - kb);
        for (int r0 = 0; r0 < rows; r0 += kMr) {
          const int mr = std::min(kMr, rows - r0);
          for (std::int64_t p = pb; p < pe; ++p) {
            const int c0 = static_cast<int>(p) * kNr;
            tile_product(kc, a + r0 * lda + kb, lda, pack + p * kNr * k + kb * kNr,
                         TileAt{r0, mr, c0, std::min(kNr, n - c0), kb == 0, kb + kc >= k}, out);
          }
        }
      }
    }
  };
  const bool parallel = threads > 1 && panels > 1 && std::int64_t(rows) * n * k >= kParallelMacs;
  if (!parallel) {
    body(0, panels);
    return;
  }
  device::cpu::HostWorkers::for_this_thread().run(std::min(threads, panels), panels, body);
}

// y[r] = act(x_r . w + b) for one output column: the dot in 8-lane partial sums (four vectors,
// then one, then the rest one by one), reduced in a fixed order.
__attribute__((target("avx2,fma"))) void single_output_forward(int rows, int in, const float* x, int ldx,
                                                               const float* w, float b, Activation act,
                                                               float* y) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + std::ptrdiff_t(r) * ldx;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int c = 0;
    for (; c + 32 <= in; c += 32) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + c), _mm256_loadu_ps(w + c), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + c + 8), _mm256_loadu_ps(w + c + 8), s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + c + 16), _mm256_loadu_ps(w + c + 16), s2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + c + 24), _mm256_loadu_ps(w + c + 24), s3);
    }
    for (; c + 8 <= in; c += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + c), _mm256_loadu_ps(w + c), s0);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; c < in; ++c) s += xr[c] * w[c];
    y[r] = kernels::activate(s + b, act);
  }
}

// dx = dz w^T for one output column (dz [rows], w [in]): an outer product, masked and summed as
// in BackwardOut.
__attribute__((target("avx2,fma"))) void single_output_backward_input(int rows, int in, const float* dz,
                                                                      const float* w, const float* mask,
                                                                      float* column_sums, float* block, float* dx) {
  if (mask)
    for (int c = 0; c < in; ++c) column_sums[c] = block[c] = 0.f;
  const __m256 zero = _mm256_setzero_ps();
  for (int r = 0; r < rows; ++r) {
    const std::ptrdiff_t row = std::ptrdiff_t(r) * in;
    const __m256 g = _mm256_broadcast_ss(dz + r);
    int c = 0;
    for (; c + 8 <= in; c += 8) {
      __m256 v = _mm256_mul_ps(g, _mm256_loadu_ps(w + c));
      if (mask) {
        v = _mm256_and_ps(v, _mm256_cmp_ps(_mm256_loadu_ps(mask + row + c), zero, _CMP_GT_OQ));
        _mm256_storeu_ps(block + c, _mm256_add_ps(_mm256_loadu_ps(block + c), v));
      }
      _mm256_storeu_ps(dx + row + c, v);
    }
    for (; c < in; ++c) {
      float v = dz[r] * w[c];
      if (mask) {
        v = mask[row + c] > 0.f ? v : 0.f;
        block[c] += v;
      }
      dx[row + c] = v;
    }
    if (mask && ((r + 1) % kSumRows == 0 || r + 1 == rows))
      for (c = 0; c < in; ++c) {
        column_sums[c] += block[c];
        block[c] = 0.f;
      }
  }
}

}  // namespace

bool fused_linear_available() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

__attribute__((target("avx2,fma"))) void linear_forward(int threads, int rows, int in, int out,
                                                        const float* x, int ldx, const float* w,
                                                        const float* b, Activation act, float* y,
                                                        float* pack) {
  if (rows <= 0) return;
  if (out == 1) {
    single_output_forward(rows, in, x, ldx, w, b[0], act, y);
    return;
  }
  // Panel p holds columns [16p, 16p + 16) of W^T: pack[k][j] = W[16p + j][k].
  auto pack_panel = [&](int p, float* dst) {
    const int c0 = p * kNr, nc = std::min(kNr, out - c0);
    for (int j = 0; j < kNr; ++j) {
      if (j < nc) {
        const float* src = w + std::ptrdiff_t(c0 + j) * in;
        for (int k = 0; k < in; ++k) dst[k * kNr + j] = src[k];
      } else {
        for (int k = 0; k < in; ++k) dst[k * kNr + j] = 0.f;
      }
    }
  };
  auto no_begin = [](int, int) {};
  switch (act) {
    case Activation::relu:
      panel_gemm(threads, rows, out, in, x, ldx, pack, pack_panel, no_begin, ForwardOut<Activation::relu>{y, out, b});
      break;
    case Activation::sigmoid:
      panel_gemm(threads, rows, out, in, x, ldx, pack, pack_panel, no_begin, ForwardOut<Activation::sigmoid>{y, out, b});
      break;
    case Activation::none:
      panel_gemm(threads, rows, out, in, x, ldx, pack, pack_panel, no_begin, ForwardOut<Activation::none>{y, out, b});
      break;
  }
}

__attribute__((target("avx2,fma"))) void linear_backward_input(int threads, int rows, int in, int out,
                                                               const float* dz, const float* w,
                                                               const float* relu_output,
                                                               float* column_sums, float* dx,
                                                               float* pack) {
  if (rows <= 0) {
    if (column_sums)
      for (int c = 0; c < in; ++c) column_sums[c] = 0.f;
    return;
  }
  float* block = pack + std::ptrdiff_t(panels_of(in)) * kNr * out;  // [in], partial column sums
  if (out == 1) {
    single_output_backward_input(rows, in, dz, w, relu_output, column_sums, block, dx);
    return;
  }
  // Panel p holds columns [16p, 16p + 16) of W: pack[k][j] = W[k][16p + j].
  auto pack_panel = [&](int p, float* dst) {
    const int c0 = p * kNr, nc = std::min(kNr, in - c0);
    for (int k = 0; k < out; ++k) {
      const float* src = w + std::ptrdiff_t(k) * in + c0;
      for (int j = 0; j < kNr; ++j) dst[k * kNr + j] = j < nc ? src[j] : 0.f;
    }
  };
  auto begin = [&](int p0, int p1) {
    if (!column_sums) return;
    for (int c = p0 * kNr; c < std::min(in, p1 * kNr); ++c) column_sums[c] = block[c] = 0.f;
  };
  panel_gemm(threads, rows, in, out, dz, out, pack, pack_panel, begin,
             BackwardOut{dx, in, relu_output, column_sums, block, rows});
}

#else  // no fused kernels in this build: callers check fused_linear_available() first

bool fused_linear_available() { return false; }

void linear_forward(int, int, int, int, const float*, int, const float*, const float*, Activation, float*,
                    float*) {
  throw std::logic_error("linear_forward: not built for this compiler or CPU");
}

void linear_backward_input(int, int, int, int, const float*, const float*, const float*, float*, float*,
                           float*) {
  throw std::logic_error("linear_backward_input: not built for this compiler or CPU");
}

#endif

}  // namespace recmix::mlp::cpu
