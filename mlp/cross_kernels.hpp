#pragma once
// The element-wise kernels of the DCN-V2 cross network (mlp/cross_net.hpp), written once as
// host/device functors like mlp/kernels.hpp: one block of kRowBlock samples a work item, so that
// the bias gradient's partial sums are reduced in a fixed order whatever the thread count.
#include "mlp/kernels.hpp"

namespace recmix::mlp::kernels {

// The end of cross layer l's forward for the samples of block `item`: v holds the layer's
// product (W (V x_l) or M x_l) on entry and v + b on exit (kept for the backward), and
// x_next = x0 * (v + b) + x_l, element-wise over the n features. Where x_next16 is set, x_next
// rounded to bf16 as well (the next layer's bf16 GEMM input).
struct CrossCombine {
  float* v;
  const float* bias;
  const float* x0;
  const float* x;
  float* x_next;
  int rows, n;
  std::uint16_t* x_next16 = nullptr;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    const Index r1 = min_index((item + 1) * kRowBlock, rows);
    for (Index r = item * kRowBlock; r < r1; ++r) {
      float* vr = v + r * n;
      const float* x0r = x0 + r * n;
      const float* xr = x + r * n;
      float* out = x_next + r * n;
      for (int c = 0; c < n; ++c) {
        const float vc = vr[c] + bias[c];
        vr[c] = vc;
        out[c] = x0r[c] * vc + xr[c];
      }
      if (x_next16)
        for (int c = 0; c < n; ++c) x_next16[r * n + c] = half::float_to_bf16(out[c]);
    }
  }
};

// The element-wise part of cross layer l's backward for the samples of block `item`, given g, the
// gradient w.r.t. x_{l+1} (read from g_in, and copied to g_out: the product's input gradient is
// added to it later):
//   dv = g * x0                        (the gradient w.r.t. v + b; written to dv)
//   gx0 = (first ? 0 : gx0) + g * v    (x0's gradient through the products of every layer)
//         + (last ? g : 0)             (layer 0: x_0 is also the layer's input, through x_l)
//   partial[item][c] = sum of dv over the block's rows, in row order (the bias gradient's part)
// Where dv16 is set, dv rounded to bf16 as well (the bf16 GEMMs' operand).
struct CrossGradient {
  const float* g_in;
  float* g_out;
  const float* x0;
  const float* v;
  float* dv;
  float* gx0;
  float* partial;
  int rows, n;
  bool first, last;
  std::uint16_t* dv16 = nullptr;
  RECMIX_HOST_DEVICE void operator()(Index item) const {
    const Index r0 = item * kRowBlock, r1 = min_index(r0 + kRowBlock, rows);
    float* part = partial + item * n;
    for (int c = 0; c < n; ++c) part[c] = 0.f;
    for (Index r = r0; r < r1; ++r) {
      const float* gr = g_in + r * n;
      float* go = g_out + r * n;
      const float* x0r = x0 + r * n;
      const float* vr = v + r * n;
      float* dvr = dv + r * n;
      float* gx = gx0 + r * n;
      for (int c = 0; c < n; ++c) {
        const float g = gr[c];
        const float d = g * x0r[c];
        dvr[c] = d;
        part[c] += d;
        float acc = first ? 0.f : gx[c];
        acc += g * vr[c];
        if (last) acc += g;
        gx[c] = acc;
        go[c] = g;
      }
      if (dv16)
        for (int c = 0; c < n; ++c) dv16[r * n + c] = half::float_to_bf16(dvr[c]);
    }
  }
};

}  // namespace recmix::mlp::kernels
