#pragma once
// Naive serial references in double for the mlp tests, and small helpers. Written independently
// of mlp/kernels.hpp: plain loops straight from the formulas in docs/math.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "mlp/cpu/threading.hpp"

namespace recmix::mlp::test {

// Lets the element-wise kernels use OpenMP threads from `elements` floats on, for one scope, so
// that tests exercise the parallel paths (off by default, mlp/cpu/threading.hpp).
class ScopedParallelThreshold {
 public:
  explicit ScopedParallelThreshold(std::int64_t elements) : saved_(cpu_parallel_threshold()) {
    set_cpu_parallel_threshold(elements);
  }
  ~ScopedParallelThreshold() { set_cpu_parallel_threshold(saved_); }

 private:
  std::int64_t saved_;
};

using Vec = std::vector<double>;

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.f,
                                        float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// y[b][o] = sum_i x[b][i] w[o][i] + bias[o]
inline Vec linear(const Vec& x, const Vec& w, const Vec& bias, int batch, int in, int out) {
  Vec y(static_cast<std::size_t>(batch) * out);
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < out; ++o) {
      double s = bias[o];
      for (int i = 0; i < in; ++i) s += x[b * in + i] * w[o * in + i];
      y[b * out + o] = s;
    }
  return y;
}

inline double relu(double v) { return v > 0 ? v : 0; }
inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Layer-by-layer reference MLP; keeps every layer's input and output for the backward.
struct RefMlp {
  std::vector<int> sizes;
  bool last_sigmoid = false;  // otherwise ReLU everywhere
  std::vector<Vec> w, b;      // [out x in], [out]
  std::vector<Vec> acts;      // acts[0] = input, acts[i+1] = output of layer i
  std::vector<Vec> dw, db;
  int batch = 0;

  Vec forward(const Vec& x, int n) {
    batch = n;
    acts = {x};
    for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
      Vec y = linear(acts.back(), w[l], b[l], n, sizes[l], sizes[l + 1]);
      bool last = l + 2 == sizes.size();
      for (auto& v : y) v = last && last_sigmoid ? sigmoid(v) : relu(v);
      acts.push_back(y);
    }
    return acts.back();
  }

  // Returns the gradient w.r.t. the input; fills dw, db.
  Vec backward(const Vec& grad_out) {
    int layers = static_cast<int>(sizes.size()) - 1;
    dw.assign(layers, {});
    db.assign(layers, {});
    Vec g = grad_out;
    for (int l = layers - 1; l >= 0; --l) {
      int in = sizes[l], out = sizes[l + 1];
      const Vec& y = acts[l + 1];
      const Vec& x = acts[l];
      bool sig = l == layers - 1 && last_sigmoid;
      Vec dz(g.size());
      for (std::size_t i = 0; i < g.size(); ++i)
        dz[i] = sig ? g[i] * y[i] * (1 - y[i]) : (y[i] > 0 ? g[i] : 0.0);
      dw[l].assign(static_cast<std::size_t>(out) * in, 0.0);
      db[l].assign(out, 0.0);
      Vec dx(static_cast<std::size_t>(batch) * in, 0.0);
      for (int s = 0; s < batch; ++s)
        for (int o = 0; o < out; ++o) {
          double d = dz[s * out + o];
          db[l][o] += d;
          for (int i = 0; i < in; ++i) {
            dw[l][o * in + i] += d * x[s * in + i];
            dx[s * in + i] += d * w[l][o * in + i];
          }
        }
      g = dx;
    }
    return g;
  }
};

// Dot interaction: T = [bottom, emb 0..k-1]; out = [bottom, T_i.T_j for i > j].
inline Vec dot_interaction(const Vec& bottom, const Vec& emb, int batch, int k, int d) {
  int out = d + (k + 1) * k / 2;
  Vec y(static_cast<std::size_t>(batch) * out);
  for (int s = 0; s < batch; ++s) {
    auto t = [&](int i, int c) {
      return i == 0 ? bottom[s * d + c] : emb[(static_cast<std::size_t>(s) * k + i - 1) * d + c];
    };
    for (int c = 0; c < d; ++c) y[s * out + c] = bottom[s * d + c];
    int idx = d;
    for (int i = 0; i <= k; ++i)
      for (int j = 0; j < i; ++j) {
        double acc = 0;
        for (int c = 0; c < d; ++c) acc += t(i, c) * t(j, c);
        y[s * out + idx++] = acc;
      }
  }
  return y;
}

inline void dot_interaction_backward(const Vec& bottom, const Vec& emb, const Vec& g, int batch,
                                     int k, int d, Vec& gb, Vec& ge) {
  int out = d + (k + 1) * k / 2;
  gb.assign(static_cast<std::size_t>(batch) * d, 0.0);
  ge.assign(static_cast<std::size_t>(batch) * k * d, 0.0);
  for (int s = 0; s < batch; ++s) {
    auto t = [&](int i, int c) {
      return i == 0 ? bottom[s * d + c] : emb[(static_cast<std::size_t>(s) * k + i - 1) * d + c];
    };
    auto gt = [&](int i, int c) -> double& {
      return i == 0 ? gb[s * d + c] : ge[(static_cast<std::size_t>(s) * k + i - 1) * d + c];
    };
    for (int c = 0; c < d; ++c) gb[s * d + c] += g[s * out + c];
    int idx = d;
    for (int i = 0; i <= k; ++i)
      for (int j = 0; j < i; ++j) {
        double w = g[s * out + idx++];
        for (int c = 0; c < d; ++c) {
          gt(i, c) += w * t(j, c);
          gt(j, c) += w * t(i, c);
        }
      }
  }
}

inline double bce_term(double p, double y) {
  double lp = p > 0 ? std::max(std::log(p), -100.0) : -100.0;
  double l1p = p < 1 ? std::max(std::log(1 - p), -100.0) : -100.0;
  return -(y * lp + (1 - y) * l1p);
}

inline Vec to_double(const float* p, std::size_t n) { return Vec(p, p + n); }

// max |a - b| / (atol + rtol |b|) <= 1 elementwise?
inline double worst(const float* a, const Vec& b, double atol, double rtol) {
  double w = 0;
  for (std::size_t i = 0; i < b.size(); ++i)
    w = std::max(w, std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i])));
  return w;
}

}  // namespace recmix::mlp::test
