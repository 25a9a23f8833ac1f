#pragma once
// The element-wise kernels of the dense model, written once as host/device functors: the CPU
// backend runs them on the calling thread and its helpers (mlp/launch.hpp), the CUDA backend
// with a grid-stride launch (mlp/cuda/launch.cu). Row kernels take a block of rows per work item, so that the CPU runs one
// tight loop per block and partial sums are reduced in a fixed order whatever the thread count.
#include <cmath>
#include <cstdint>

#include "core/half.hpp"
#include "core/lr_schedule.hpp"
#include "device/types.hpp"
#include "mlp/types.hpp"

namespace recmix::mlp::kernels {

using Index = std::int64_t;

// Rows per work item of the row kernels; fixed, so that reductions do not depend on threads.
inline constexpr int kRowBlock = 32;
// Elements per work item of the flat (optimizer) kernels.
inline constexpr Index kFlatBlock = 8192;

RECMIX_HOST_DEVICE inline Index min_index(Index a, Index b) { return a < b ? a : b; }

RECMIX_HOST_DEVICE inline float sigmoid(float x) { return 1.f / (1.f + ::expf(-x)); }

// One value through an activation, as BiasActivationForward applies it (ReLU: v > 0 ? v : 0).
RECMIX_HOST_DEVICE inline float activate(float v, Activation act) {
  switch (act) {
    case Activation::relu: return v > 0.f ? v : 0.f;
    case Activation::sigmoid: return sigmoid(v);
    case Activation::none: break;
  }
  return v;
}

// Weight init, kFlatBlock values a work item: value[i] = normal(seed, stream, i) * scale (the
// reference DLRM's normal init) or uniform(seed, stream, i) over [-scale, scale) (TorchRec's).
enum class InitDistribution { normal, uniform };
struct InitRandom {
  float* value;
  Index count;
  std::uint64_t seed, stream;
  InitDistribution distribution;
  float scale;
  RECMIX_HOST_DEVICE void operator()(Index item) const;
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return count; }
  RECMIX_HOST_DEVICE void fine(Index i) const;
};

// y[r, :] = act(y[r, :] + bias) for the rows of block `item`; y holds x W^T on entry.
struct BiasActivationForward {
  float* y;
  const float* bias;
  int rows, cols;
  Activation act;
  std::uint16_t* y16 = nullptr;  // where set, y rounded to bf16 as well (the next bf16 GEMM's input)
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    Index r0 = item * kRowBlock, r1 = min_index(r0 + kRowBlock, rows);
    for (Index r = r0; r < r1; ++r) {
      float* row = y + r * cols;
      switch (act) {
        case Activation::none:
          for (int c = 0; c < cols; ++c) row[c] += bias[c];
          break;
        case Activation::relu:
          for (int c = 0; c < cols; ++c) {
            float v = row[c] + bias[c];
            row[c] = v > 0.f ? v : 0.f;
          }
          break;
        case Activation::sigmoid:
          for (int c = 0; c < cols; ++c) row[c] = sigmoid(row[c] + bias[c]);
          break;
      }
      if (y16)
        for (int c = 0; c < cols; ++c) y16[r * cols + c] = half::float_to_bf16(row[c]);
    }
  }
  // Fine decomposition (device/fine_grained.hpp): one element.
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return static_cast<Index>(rows) * cols; }
  RECMIX_HOST_DEVICE void fine(Index i) const {
    y[i] = activate(y[i] + bias[i % cols], act);
    if (y16) y16[i] = half::float_to_bf16(y[i]);
  }
};

// Activation backward in place for the rows of block `item`: dz = dz * act'(y) (dz holds dL/dy on
// entry, y is the post-activation output), and partial[item][c] = sum of dz[r][c] over the rows.
struct ActivationBackward {
  float* dz;
  const float* y;
  float* partial;
  int rows, cols;
  Activation act;
  std::uint16_t* dz16 = nullptr;  // where set, dz rounded to bf16 as well (for the bf16 GEMMs)
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    Index r0 = item * kRowBlock, r1 = min_index(r0 + kRowBlock, rows);
    float* __restrict acc = partial + item * cols;
    for (int c = 0; c < cols; ++c) acc[c] = 0.f;
    for (Index r = r0; r < r1; ++r) {
      const float* __restrict out = y + r * cols;
      float* __restrict d = dz + r * cols;
      switch (act) {
        case Activation::none:
          for (int c = 0; c < cols; ++c) acc[c] += d[c];
          break;
        case Activation::relu:
          for (int c = 0; c < cols; ++c) {
            float v = out[c] > 0.f ? d[c] : 0.f;
            d[c] = v;
            acc[c] += v;
          }
          break;
        case Activation::sigmoid:
          for (int c = 0; c < cols; ++c) {
            float v = d[c] * (1.f - out[c]) * out[c];  // torch's sigmoid_backward
            d[c] = v;
            acc[c] += v;
          }
          break;
      }
      if (dz16)
        for (int c = 0; c < cols; ++c) dz16[r * cols + c] = half::float_to_bf16(d[c]);
    }
  }
  // Fine decomposition: one column of one block, its rows summed in the same order.
  RECMIX_HOST_DEVICE Index fine_items(Index blocks) const { return blocks * cols; }
  // The rows are read kFineRows at a time before any is written: dz and y could alias as far as a
  // compiler knows, so a row at a time made each row's loads wait for the row before's store (on
  // an H200, 17 us a layer whatever its width: 32 memory latencies in a row).
  static constexpr int kFineRows = 8;
  RECMIX_HOST_DEVICE void fine(Index i) const {
    const Index item = i / cols;
    const int c = static_cast<int>(i % cols);
    const Index r1 = min_index((item + 1) * kRowBlock, rows);
    float acc = 0.f;
    for (Index r0 = item * kRowBlock; r0 < r1; r0 += kFineRows) {
      float v[kFineRows] = {}, out[kFineRows] = {};
      for (int k = 0; k < kFineRows; ++k)
        if (r0 + k < r1) v[k] = dz[(r0 + k) * cols + c], out[k] = y[(r0 + k) * cols + c];
      for (int k = 0; k < kFineRows; ++k) {
        if (r0 + k >= r1) break;
        switch (act) {
          case Activation::none: break;
          case Activation::relu: v[k] = out[k] > 0.f ? v[k] : 0.f; break;
          case Activation::sigmoid: v[k] = v[k] * (1.f - out[k]) * out[k]; break;
        }
        dz[(r0 + k) * cols + c] = v[k];
        if (dz16) dz16[(r0 + k) * cols + c] = half::float_to_bf16(v[k]);
        acc += v[k];
      }
    }
    partial[item * cols + c] = acc;
  }
};

// out[c] = sum over blocks b of partial[b][c], blocks in order.
struct ColumnSum {
  const float* partial;
  float* out;
  int blocks, cols;
  RECMIX_HOST_DEVICE void operator()(Index c) const {
    float s = 0.f;
    for (int b = 0; b < blocks; ++b) s += partial[static_cast<Index>(b) * cols + c];
    out[c] = s;
  }
};

// Width of the register blocks of the CPU-tuned interaction kernels (mlp/cpu/kernels.cpp).
inline constexpr int kLanes = 8;

RECMIX_HOST_DEVICE inline int round_up_lanes(int n) { return (n + kLanes - 1) / kLanes * kLanes; }

// Dot interaction forward for the samples of block `item`: out = [bottom, T_i . T_j for i > j,
// row-major], each dot summed over the components in order. (The CPU-tuned version uses the
// scratch to hold T transposed; this one does not need it.)
struct DotInteractionForward {
  const float* bottom;
  const float* emb;
  float* out;
  float* scratch;  // d * round_up_lanes(k + 1) floats per block, zero-initialised
  int batch, k, d, out_cols;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    const int n = k + 1;
    Index s1 = min_index((item + 1) * kRowBlock, batch);
    for (Index s = item * kRowBlock; s < s1; ++s) {
      const float* b = bottom + s * d;
      const float* e = emb + s * k * d;
      float* o = out + s * out_cols;
      for (int c = 0; c < d; ++c) o[c] = b[c];
      float* z = o + d;
      for (int i = 1; i < n; ++i) {
        const float* ti = e + (i - 1) * d;
        for (int j = 0; j < i; ++j) {
          const float* tj = j == 0 ? b : e + (j - 1) * d;
          float acc = 0.f;
          for (int c = 0; c < d; ++c) acc += ti[c] * tj[c];
          z[j] = acc;
        }
        z += i;
      }
    }
  }
  // Fine decomposition: one output of one sample (the same dot, summed in the same order).
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return static_cast<Index>(batch) * out_cols; }
  RECMIX_HOST_DEVICE void fine(Index idx) const {
    const Index s = idx / out_cols;
    const int o = static_cast<int>(idx % out_cols);
    const float* b = bottom + s * d;
    if (o < d) {
      out[idx] = b[o];
      return;
    }
    const int p = o - d;
    if (p >= (k + 1) * k / 2) return;  // padding, if any: not written, as above
    int i = 1;
    while ((i + 1) * i / 2 <= p) ++i;
    const int j = p - i * (i - 1) / 2;
    const float* e = emb + s * k * d;
    const float* ti = e + (i - 1) * d;
    const float* tj = j == 0 ? b : e + (j - 1) * d;
    float acc = 0.f;
    for (int c = 0; c < d; ++c) acc += ti[c] * tj[c];
    out[idx] = acc;
  }
};

// Dot interaction backward for the samples of block `item`. With g_ij the gradient of dot (i, j),
// i > j, stored at d + i(i-1)/2 + j, and G the symmetric matrix with G_ij = G_ji = g_ij and a zero
// diagonal: dT_i = sum_j G_ij T_j, summed over j in order; grad_bottom = grad_out[0:d] + dT_0,
// grad_emb[t] = dT_{t+1}. G is spread into the block's scratch first; the diagonal's zero terms are
// added too (the CPU-tuned version reads G in place and adds the same terms in the same order, so
// it gives the same bits).
// G (n x n, row-major) from the packed strictly-lower triangle gz: G_ij = G_ji = gz[i(i-1)/2 + j]
// for i > j, zero diagonal.
RECMIX_HOST_DEVICE inline void spread_symmetric(const float* gz, int n, float* g_sym) {
  for (int i = 0; i < n; ++i) {
    g_sym[i * n + i] = 0.f;
    for (int j = 0; j < i; ++j) {
      const float w = gz[i * (i - 1) / 2 + j];
      g_sym[i * n + j] = w;
      g_sym[j * n + i] = w;
    }
  }
}

struct DotInteractionBackward {
  const float* bottom;
  const float* emb;
  const float* grad_out;
  float* grad_bottom;
  float* grad_emb;
  float* scratch;  // (k + 1)^2 floats per block
  int batch, k, d, out_cols;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    const int n = k + 1;
    float* __restrict g_sym = scratch + item * n * n;
    Index s1 = min_index((item + 1) * kRowBlock, batch);
    for (Index s = item * kRowBlock; s < s1; ++s) {
      const float* b = bottom + s * d;
      const float* e = emb + s * k * d;  // rows 1 .. k of T, contiguous
      const float* gx = grad_out + s * out_cols;
      const float* gz = gx + d;
      spread_symmetric(gz, n, g_sym);
      for (int i = 0; i < n; ++i) row_gradient(i, 0, s, b, e, gx, g_sym + i * n);
    }
  }

  // dT_i (row = G_i) for components c0 .. d-1.
  RECMIX_HOST_DEVICE void row_gradient(int i, int c0, Index s, const float* b, const float* e,
                                            const float* gx, const float* row) const {
    const int n = k + 1;
    float* gi = i == 0 ? grad_bottom + s * d : grad_emb + (s * k + i - 1) * d;
    for (int c = c0; c < d; ++c) {
      float sum = i == 0 ? gx[c] : 0.f;
      sum += row[0] * b[c];
      for (int j = 1; j < n; ++j) sum += row[j] * e[(j - 1) * d + c];
      gi[c] = sum;
    }
  }

  // Fine decomposition: component c of dT_i of one sample, G read from the packed triangle (the
  // same terms, the zero diagonal included, in the same order).
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return static_cast<Index>(batch) * (k + 1) * d; }
  RECMIX_HOST_DEVICE void fine(Index idx) const {
    const int n = k + 1;
    const Index s = idx / (static_cast<Index>(n) * d);
    const int rem = static_cast<int>(idx % (static_cast<Index>(n) * d));
    const int i = rem / d, c = rem % d;
    const float* b = bottom + s * d;
    const float* e = emb + s * k * d;
    const float* gx = grad_out + s * out_cols;
    const float* gz = gx + d;
    auto g = [&](int j) {
      if (i == j) return 0.f;
      const int hi = i > j ? i : j, lo = i > j ? j : i;
      return gz[hi * (hi - 1) / 2 + lo];
    };
    float sum = i == 0 ? gx[c] : 0.f;
    sum += g(0) * b[c];
    for (int j = 1; j < n; ++j) sum += g(j) * e[(j - 1) * d + c];
    (i == 0 ? grad_bottom + s * d : grad_emb + (s * k + i - 1) * d)[c] = sum;
  }
};

// Cat interaction forward for sample s: out = [bottom, emb 0 .. emb k-1].
struct CatInteractionForward {
  const float* bottom;
  const float* emb;
  float* out;
  int k, d;
  RECMIX_HOST_DEVICE void operator()(Index s) const {
    const float* b = bottom + s * d;
    const float* e = emb + s * k * d;
    float* o = out + s * (k + 1) * d;
    for (int c = 0; c < d; ++c) o[c] = b[c];
    for (int c = 0; c < k * d; ++c) o[d + c] = e[c];
  }
  // Fine decomposition: one element of the output.
  RECMIX_HOST_DEVICE Index fine_items(Index batch) const { return batch * (k + 1) * d; }
  RECMIX_HOST_DEVICE void fine(Index idx) const {
    const Index s = idx / ((k + 1) * d);
    const int o = static_cast<int>(idx % ((k + 1) * d));
    out[idx] = o < d ? bottom[s * d + o] : emb[s * k * d + o - d];
  }
};

struct CatInteractionBackward {
  const float* grad_out;
  float* grad_bottom;
  float* grad_emb;
  int k, d;
  RECMIX_HOST_DEVICE void operator()(Index s) const {
    const float* g = grad_out + s * (k + 1) * d;
    float* gb = grad_bottom + s * d;
    float* ge = grad_emb + s * k * d;
    for (int c = 0; c < d; ++c) gb[c] = g[c];
    for (int c = 0; c < k * d; ++c) ge[c] = g[d + c];
  }
  RECMIX_HOST_DEVICE Index fine_items(Index batch) const { return batch * (k + 1) * d; }
  RECMIX_HOST_DEVICE void fine(Index idx) const {
    const Index s = idx / ((k + 1) * d);
    const int o = static_cast<int>(idx % ((k + 1) * d));
    if (o < d)
      grad_bottom[s * d + o] = grad_out[idx];
    else
      grad_emb[s * k * d + o - d] = grad_out[idx];
  }
};

// One BCE term (torch.nn.BCELoss): -(y max(log p, -100) + (1 - y) max(log(1 - p), -100)).
RECMIX_HOST_DEVICE inline double bce_term(float p, float y) {
  double log_p = ::log(static_cast<double>(p));
  double log_1mp = ::log(1.0 - static_cast<double>(p));
  if (!(log_p >= -100.0)) log_p = -100.0;      // also catches log(0) = -inf
  if (!(log_1mp >= -100.0)) log_1mp = -100.0;
  return -(static_cast<double>(y) * log_p + (1.0 - static_cast<double>(y)) * log_1mp);
}

// torch's binary_cross_entropy_backward: grad * (p - y) / max((1 - p) p, 1e-12).
RECMIX_HOST_DEVICE inline float bce_gradient(float p, float y, float grad) {
  float denom = (1.f - p) * p;
  if (denom < 1e-12f) denom = 1e-12f;
  return grad * (p - y) / denom;
}

// The per-sample terms and, with `grad` set, in the same pass the gradient BceBackward writes.
struct BceTerms {
  const float* prob;
  const float* labels;
  double* terms;
  float* grad = nullptr;
  float scale = 1.f;
  RECMIX_HOST_DEVICE void operator()(Index i) const {
    terms[i] = bce_term(prob[i], labels[i]);
    if (grad) grad[i] = bce_gradient(prob[i], labels[i], scale);
  }
};

// The loss's sum on the device, in a fixed order on every backend: per-sample terms summed a block
// of kLossBlock at a time in index order (BlockSums), then the block sums in order, added to a
// running total that the host reads only at a log record (AddBlockSums, one item).
inline constexpr Index kLossBlock = 64;
struct BlockSums {
  const double* terms;
  Index n;
  double* sums;  // [ceil(n / kLossBlock)]
  RECMIX_HOST_DEVICE void operator()(Index j) const {
    const Index end = min_index((j + 1) * kLossBlock, n);
    double s = 0.0;
    for (Index i = j * kLossBlock; i < end; ++i) s += terms[i];
    sums[j] = s;
  }
};
struct AddBlockSums {
  const double* sums;
  Index blocks;
  double* total;
  RECMIX_HOST_DEVICE void operator()(Index) const {
    double s = 0.0;
    for (Index j = 0; j < blocks; ++j) s += sums[j];
    *total += s;
  }
};

// *flag = 1 where v[i] is NaN or infinite (x - x is 0 for every finite x); every writer writes the
// same value, so the result does not depend on the order. The divergence check's device half.
struct FlagNonFinite {
  const float* v;
  int* flag;
  RECMIX_HOST_DEVICE void operator()(Index i) const {
    const float x = v[i];
    if (!(x - x == 0.0f)) *flag = 1;
  }
};

struct BceBackward {
  const float* prob;
  const float* labels;
  float* grad;
  float scale;
  RECMIX_HOST_DEVICE void operator()(Index i) const { grad[i] = bce_gradient(prob[i], labels[i], scale); }
};

// The learning-rate schedule's factor for the coming step (core/lr_schedule.hpp), from the step
// count in device memory, so that a captured step replayed later uses its own step's: writes
// scale[0] = schedule.scale(t) with t = *steps + 1, and counts the step when `count` is set
// (Adam's corrections count it otherwise). One item.
struct ScheduleScale {
  std::int64_t* steps;
  float* scale;
  LrSchedule schedule;
  bool count;
  RECMIX_HOST_DEVICE void operator()(Index) const {
    const std::int64_t t = *steps + 1;
    if (count) *steps = t;
    scale[0] = schedule.scale(t);
  }
};

// Optimizer updates over the elements of block `item` of one parameter. With `scale` set (a
// schedule), the rate is lr * scale[0], read from device memory.
struct SgdStep {
  float* value;
  const float* grad;
  Index count;
  float lr;
  const float* scale = nullptr;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    const float rate = scale ? lr * scale[0] : lr;
    Index i1 = min_index((item + 1) * kFlatBlock, count);
    for (Index i = item * kFlatBlock; i < i1; ++i) value[i] -= rate * grad[i];
  }
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return count; }
  RECMIX_HOST_DEVICE void fine(Index i) const { value[i] -= (scale ? lr * scale[0] : lr) * grad[i]; }
};

struct AdagradStep {
  float* value;
  const float* grad;
  float* sum;
  Index count;
  float lr, eps;
  const float* scale = nullptr;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    const float rate = scale ? lr * scale[0] : lr;
    Index i1 = min_index((item + 1) * kFlatBlock, count);
    for (Index i = item * kFlatBlock; i < i1; ++i) update(i, rate);
  }
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return count; }
  RECMIX_HOST_DEVICE void fine(Index i) const { update(i, scale ? lr * scale[0] : lr); }
  RECMIX_HOST_DEVICE void update(Index i, float rate) const {
    float g = grad[i];
    float s = sum[i] + g * g;
    sum[i] = s;
    value[i] -= rate * (g / (::sqrtf(s) + eps));
  }
};

// Adam's bias corrections for the coming step, from the step count in device memory, so that a
// captured step replayed later uses the count of its own step (device/graph.hpp): counts the
// step, then writes corrections[0] = lr / (1 - beta1^t) and corrections[1] = sqrt(1 - beta2^t),
// as torch; with `scale` set (a schedule), lr * scale[0] in place of lr. One item.
struct AdamCorrections {
  std::int64_t* steps;
  float* corrections;
  float lr, beta1, beta2;
  const float* scale = nullptr;
  RECMIX_HOST_DEVICE void operator()(Index) const {
    const std::int64_t t = ++*steps;
    const double bias1 = 1.0 - ::pow(static_cast<double>(beta1), static_cast<double>(t));
    const double bias2 = 1.0 - ::pow(static_cast<double>(beta2), static_cast<double>(t));
    const float rate = scale ? lr * scale[0] : lr;
    corrections[0] = static_cast<float>(rate / bias1);
    corrections[1] = static_cast<float>(::sqrt(bias2));
  }
};

// One Adam step with the corrections AdamCorrections wrote: [step_size, bias2_sqrt].
struct AdamStep {
  float* value;
  const float* grad;
  float* m;
  float* v;
  Index count;
  float beta1, beta2, eps;
  const float* corrections;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    const float step_size = corrections[0], bias2_sqrt = corrections[1];
    Index i1 = min_index((item + 1) * kFlatBlock, count);
    for (Index i = item * kFlatBlock; i < i1; ++i) update(i, step_size, bias2_sqrt);
  }
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return count; }
  RECMIX_HOST_DEVICE void fine(Index i) const { update(i, corrections[0], corrections[1]); }
  RECMIX_HOST_DEVICE void update(Index i, float step_size, float bias2_sqrt) const {
    float g = grad[i];
    float mi = beta1 * m[i] + (1.f - beta1) * g;
    float vi = beta2 * v[i] + (1.f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float denom = ::sqrtf(vi) / bias2_sqrt + eps;
    value[i] -= step_size * (mi / denom);
  }
};

// Every parameter's optimizer step in one launch (a multi-tensor step): steps[p] is parameter
// p's functor (SgdStep, AdagradStep or AdamStep) and its elements are [starts[p], starts[p + 1])
// of the launch's flat index, starts[params] being the total. A model has tens of parameters, many
// of them biases of a few values, so one launch in place of one a parameter saves the GPU a
// kernel's start and drain for each. Each element gets the operations its own functor gives it.
template <class Step>
struct ParamSteps {
  const Step* steps;    // device memory, `params` of them
  const Index* starts;  // device memory, params + 1
  int params;
  Index total;          // starts[params], by value: fine_items() runs on the host
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    Index i1 = min_index((item + 1) * kFlatBlock, total);
    for (Index i = item * kFlatBlock; i < i1; ++i) fine(i);
  }
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return total; }
  RECMIX_HOST_DEVICE void fine(Index i) const {
    int lo = 0, hi = params;  // starts[lo] <= i < starts[hi]
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (starts[mid] <= i) lo = mid;
      else hi = mid;
    }
    steps[lo].fine(i - starts[lo]);
  }
};
using SgdSteps = ParamSteps<SgdStep>;
using AdagradSteps = ParamSteps<AdagradStep>;
using AdamSteps = ParamSteps<AdamStep>;

struct Fill {
  float* value;
  Index count;
  float x;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    Index i1 = min_index((item + 1) * kFlatBlock, count);
    for (Index i = item * kFlatBlock; i < i1; ++i) value[i] = x;
  }
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return count; }
  RECMIX_HOST_DEVICE void fine(Index i) const { value[i] = x; }
};

// The bf16 GEMMs' operands: dst[i] = src[i] rounded to the nearest bf16 (ties to even).
struct RoundToBf16 {
  const float* src;
  std::uint16_t* dst;
  Index count;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    Index i1 = min_index((item + 1) * kFlatBlock, count);
    for (Index i = item * kFlatBlock; i < i1; ++i) fine(i);
  }
  RECMIX_HOST_DEVICE Index fine_items(Index) const { return count; }
  RECMIX_HOST_DEVICE void fine(Index i) const { dst[i] = half::float_to_bf16(src[i]); }
};

}  // namespace recmix::mlp::kernels

// InitRandom needs core/random.hpp (host/device as well).
#include "core/random.hpp"

namespace recmix::mlp::kernels {
RECMIX_HOST_DEVICE inline void InitRandom::operator()(Index item) const {
  Index i1 = min_index((item + 1) * kFlatBlock, count);
  for (Index i = item * kFlatBlock; i < i1; ++i) fine(i);
}
RECMIX_HOST_DEVICE inline void InitRandom::fine(Index i) const {
  const auto at = static_cast<std::uint64_t>(i);
  value[i] = distribution == InitDistribution::normal ? random::normal(seed, stream, at, 0.f, scale)
                                                      : random::uniform(seed, stream, at, -scale, scale);
}
}  // namespace recmix::mlp::kernels
