// DLRM-DCNv2 trained by recmix against a float64 implementation of the whole model written here
// from docs/math.md and docs/embedding.md: the bottom MLP, sum-pooled bags, the cross layers, the
// top MLP, the mean binary cross-entropy, and the dense and sparse optimizers. Both start from
// recmix's step-0 checkpoint and take the same global batches; after several steps every tensor
// must agree to 1e-5 of its largest value, and every tensor's change (what the steps did) to 1e-3
// of its largest change. At 1, 2 and 4 ranks (the global batch split over them), low and full
// rank, one-hot and multi-hot, SGD, Adagrad and row-wise Adagrad, on the cpu backend and under
// cpu-strict.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <string>
#include <vector>

#include "data/reader.hpp"
#include "trainer_test_support.hpp"

using namespace recmix;
using namespace recmix::runtime;
using namespace recmix::runtime::testing_support;

namespace {

const int kDense = 5;  // the World datasets' dense features
const int kDim = 8;

using Vec = std::vector<double>;

struct Options {
  int layers = 2, rank = 3;  // rank 0: full rank
  std::string dense = "sgd", sparse = "sgd";
  double lr = 0.1, eps = 1e-8, initial_accumulator = 0;
};

// The whole model in float64, its parameters by their checkpoint names.
class Reference {
 public:
  Reference(const std::vector<Tensor>& start, Options o) : o_(o) {
    for (const Tensor& t : start) {
      p_[t.name] = Vec(t.values.begin(), t.values.end());
      state_[t.name] = Vec(t.values.size(), o.initial_accumulator);
    }
  }

  std::vector<Tensor> tensors(const std::vector<Tensor>& like) const {
    std::vector<Tensor> out;
    for (const Tensor& t : like) out.push_back({t.name, std::vector<float>(p_.at(t.name).begin(), p_.at(t.name).end())});
    return out;
  }

  // One step on a global batch (one-hot batches as CSR too: offsets 0, 1, ...).
  void step(const data::Batch& b) {
    std::map<std::string, Vec> g;
    for (auto& [name, v] : p_) g[name] = Vec(v.size(), 0.0);
    for (int i = 0; i < b.size; ++i) sample(b, i, g);
    for (auto& [name, grad] : g) {
      if (name.rfind("embedding/", 0) == 0)
        update_table(name, grad, b);
      else
        update_dense(name, grad);
    }
  }

 private:
  // y = act(W x + b) for a linear layer named `layer` ("bottom.0").
  Vec linear(const std::string& layer, const Vec& x, bool relu) const {
    const Vec& w = p_.at("dense/" + layer + ".weight");
    const Vec& bias = p_.at("dense/" + layer + ".bias");
    Vec y(bias.size());
    for (std::size_t r = 0; r < y.size(); ++r) {
      double s = bias[r];
      for (std::size_t c = 0; c < x.size(); ++c) s += w[r * x.size() + c] * x[c];
      y[r] = relu ? std::max(s, 0.0) : s;
    }
    return y;
  }
  // Backward of linear given dL/dy (y kept): adds to the gradients, returns dL/dx.
  Vec linear_back(const std::string& layer, const Vec& x, const Vec& y, Vec dy, bool relu, std::map<std::string, Vec>& g) const {
    const Vec& w = p_.at("dense/" + layer + ".weight");
    Vec& gw = g["dense/" + layer + ".weight"];
    Vec& gb = g["dense/" + layer + ".bias"];
    Vec dx(x.size(), 0.0);
    for (std::size_t r = 0; r < y.size(); ++r) {
      if (relu && y[r] <= 0) dy[r] = 0;
      gb[r] += dy[r];
      for (std::size_t c = 0; c < x.size(); ++c) {
        gw[r * x.size() + c] += dy[r] * x[c];
        dx[c] += dy[r] * w[r * x.size() + c];
      }
    }
    return dx;
  }
  // M v for M [rows x v.size()] stored row-major.
  static Vec matvec(const Vec& m, const Vec& v, std::size_t rows) {
    Vec out(rows, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < v.size(); ++c) out[r] += m[r * v.size() + c] * v[c];
    return out;
  }
  // M^T v for M [v.size() x cols].
  static Vec matvec_t(const Vec& m, const Vec& v, std::size_t cols) {
    Vec out(cols, 0.0);
    for (std::size_t r = 0; r < v.size(); ++r)
      for (std::size_t c = 0; c < cols; ++c) out[c] += m[r * cols + c] * v[r];
    return out;
  }

  void sample(const data::Batch& b, int i, std::map<std::string, Vec>& g) const {
    const int tables = static_cast<int>(b.offsets.size());
    // Bottom MLP, ReLU after every layer.
    std::vector<Vec> bottom{Vec(b.dense.begin() + i * kDense, b.dense.begin() + (i + 1) * kDense)};
    for (int l = 0; p_.count(fmt::format("dense/bottom.{}.weight", l)); ++l)
      bottom.push_back(linear(fmt::format("bottom.{}", l), bottom.back(), true));
    // x0 = [bottom output, the summed bags].
    Vec x0 = bottom.back();
    for (int t = 0; t < tables; ++t) {
      const Vec& table = p_.at(fmt::format("embedding/{}/weights", t));
      Vec e(kDim, 0.0);
      for (auto k = b.offsets[t][i]; k < b.offsets[t][i + 1]; ++k)
        for (int d = 0; d < kDim; ++d) e[d] += table[b.indices[t][k] * kDim + d];
      x0.insert(x0.end(), e.begin(), e.end());
    }
    const std::size_t n = x0.size();
    // Cross layers: x_{l+1} = x0 * (W (V x_l) + b) + x_l (full rank: M x_l).
    std::vector<Vec> xs{x0}, us, vs;
    for (int l = 0; l < o_.layers; ++l) {
      const Vec& x = xs.back();
      Vec u, v;
      if (o_.rank > 0) {
        u = matvec(p_.at(fmt::format("dense/cross.{}.V", l)), x, o_.rank);
        v = matvec(p_.at(fmt::format("dense/cross.{}.W", l)), u, n);
      } else {
        v = matvec(p_.at(fmt::format("dense/cross.{}.weight", l)), x, n);
      }
      const Vec& bias = p_.at(fmt::format("dense/cross.{}.bias", l));
      Vec next(n);
      for (std::size_t j = 0; j < n; ++j) next[j] = x0[j] * (v[j] + bias[j]) + x[j];
      us.push_back(u);
      vs.push_back(v);
      xs.push_back(next);
    }
    // Top MLP: ReLU but for the last layer, then the sigmoid.
    std::vector<Vec> top{xs.back()};
    int top_layers = 0;
    while (p_.count(fmt::format("dense/top.{}.weight", top_layers))) ++top_layers;
    for (int l = 0; l < top_layers; ++l) top.push_back(linear(fmt::format("top.{}", l), top.back(), l + 1 < top_layers));
    const double p = 1.0 / (1.0 + std::exp(-top.back()[0]));
    // Mean BCE over the global batch: dL/dlogit = (p - y) / B.
    Vec dy{(p - b.labels[i]) / static_cast<double>(b.size)};
    for (int l = top_layers - 1; l >= 0; --l)
      dy = linear_back(fmt::format("top.{}", l), top[l], top[l + 1], dy, l + 1 < top_layers, g);
    // Cross layers, top down; dx0 collects x0's part in every layer.
    Vec dx0(n, 0.0);
    for (int l = o_.layers - 1; l >= 0; --l) {
      const Vec& x = xs[l];
      const Vec& bias = p_.at(fmt::format("dense/cross.{}.bias", l));
      Vec dv(n), gb_add(n);
      for (std::size_t j = 0; j < n; ++j) {
        dv[j] = dy[j] * x0[j];
        dx0[j] += dy[j] * (vs[l][j] + bias[j]);
      }
      Vec& gbias = g[fmt::format("dense/cross.{}.bias", l)];
      for (std::size_t j = 0; j < n; ++j) gbias[j] += dv[j];
      Vec dx = dy;  // the residual
      if (o_.rank > 0) {
        const Vec& V = p_.at(fmt::format("dense/cross.{}.V", l));
        const Vec& W = p_.at(fmt::format("dense/cross.{}.W", l));
        const Vec du = matvec_t(W, dv, o_.rank);
        Vec& gW = g[fmt::format("dense/cross.{}.W", l)];
        Vec& gV = g[fmt::format("dense/cross.{}.V", l)];
        for (std::size_t j = 0; j < n; ++j)
          for (int r = 0; r < o_.rank; ++r) gW[j * o_.rank + r] += dv[j] * us[l][r];
        for (int r = 0; r < o_.rank; ++r)
          for (std::size_t j = 0; j < n; ++j) gV[r * n + j] += du[r] * x[j];
        const Vec back = matvec_t(V, du, n);
        for (std::size_t j = 0; j < n; ++j) dx[j] += back[j];
      } else {
        const Vec& M = p_.at(fmt::format("dense/cross.{}.weight", l));
        Vec& gM = g[fmt::format("dense/cross.{}.weight", l)];
        for (std::size_t r = 0; r < n; ++r)
          for (std::size_t c = 0; c < n; ++c) gM[r * n + c] += dv[r] * x[c];
        const Vec back = matvec_t(M, dv, n);
        for (std::size_t j = 0; j < n; ++j) dx[j] += back[j];
      }
      dy = dx;
    }
    for (std::size_t j = 0; j < n; ++j) dy[j] += dx0[j];  // layer 0's input is x0 itself
    // Split: the bottom output's part, then each table's bag gradient to every index of the bag.
    Vec db(dy.begin(), dy.begin() + kDim);
    for (int t = 0; t < tables; ++t) {
      Vec& gt = g[fmt::format("embedding/{}/weights", t)];
      for (auto k = b.offsets[t][i]; k < b.offsets[t][i + 1]; ++k)
        for (int d = 0; d < kDim; ++d) gt[b.indices[t][k] * kDim + d] += dy[kDim * (t + 1) + d];
    }
    for (int l = static_cast<int>(bottom.size()) - 2; l >= 0; --l)
      db = linear_back(fmt::format("bottom.{}", l), bottom[l], bottom[l + 1], db, true, g);
  }

  void update_dense(const std::string& name, const Vec& g) {
    Vec& w = p_.at(name);
    Vec& s = state_.at(name);
    for (std::size_t j = 0; j < w.size(); ++j) {
      if (o_.dense == "sgd") {
        w[j] -= o_.lr * g[j];
      } else {
        s[j] += g[j] * g[j];
        w[j] -= o_.lr * g[j] / (std::sqrt(s[j]) + o_.eps);
      }
    }
  }

  // The rows the batch touched, each once with its summed gradient.
  void update_table(const std::string& name, const Vec& g, const data::Batch& b) {
    const int t = std::stoi(name.substr(std::string("embedding/").size()));
    std::vector<std::int64_t> rows(b.indices[t].begin(), b.indices[t].end());
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    Vec& w = p_.at(name);
    Vec& s = state_.at(name);  // element-wise; row-wise Adagrad keeps its value in the row's first
    for (auto r : rows) {
      const std::size_t at = static_cast<std::size_t>(r) * kDim;
      double mean_square = 0;
      for (int d = 0; d < kDim; ++d) mean_square += g[at + d] * g[at + d] / kDim;
      if (o_.sparse == "rowwise_adagrad") s[at] += mean_square;
      for (int d = 0; d < kDim; ++d) {
        if (o_.sparse == "sgd") {
          w[at + d] -= o_.lr * g[at + d];
        } else if (o_.sparse == "adagrad") {
          s[at + d] += g[at + d] * g[at + d];
          w[at + d] -= o_.lr * g[at + d] / (std::sqrt(s[at + d]) + o_.eps);
        } else {
          w[at + d] -= o_.lr * g[at + d] / (std::sqrt(s[at]) + o_.eps);
        }
      }
    }
  }

  Options o_;
  std::map<std::string, Vec> p_, state_;
};

// The first `steps` global batches of a dataset, read on one rank, as CSR.
std::vector<data::Batch> global_batches(const JobSpec& spec, int steps) {
  data::ReaderOptions ro;
  ro.global_batch = spec.train.batch_size;
  ro.prefetch = 0;
  data::Reader reader(spec.data.train, ro);
  std::vector<data::Batch> out(steps);
  for (auto& b : out) EXPECT_TRUE(reader.next(b));
  return out;
}

// The weights only (a checkpoint also holds the optimizers' state and checksums).
std::vector<Tensor> weights_of(const std::string& checkpoint) {
  std::vector<Tensor> out;
  for (Tensor& t : read_weights(checkpoint))
    if (t.name.rfind("dense/", 0) == 0 || t.name.find("/weights") != std::string::npos) out.push_back(std::move(t));
  return out;
}

struct Case {
  const char* label;
  const char* data;
  const char* device;
  Options options;
};

class DcnReference : public testing::TestWithParam<Case> {};

TEST_P(DcnReference, TrainsAsTheFloat64Model) {
  const Case& c = GetParam();
  const int steps = 4;
  auto spec = small_spec(fmt::format("dcnref-{}-{}", c.label, world->comm->size()), c.data);
  spec.model.interaction = mlp::InteractionKind::dcn;
  spec.model.cross_layers = c.options.layers;
  spec.model.cross_rank = c.options.rank;
  spec.optimizer.dense = parse_choice<DenseOptimizerKind>(c.options.dense, "optimizer.dense");
  spec.optimizer.sparse = parse_choice<SparseOptimizerKind>(c.options.sparse, "optimizer.sparse");
  spec.optimizer.lr = static_cast<float>(c.options.lr);
  spec.optimizer.eps = static_cast<float>(c.options.eps);
  spec.optimizer.initial_accumulator = static_cast<float>(c.options.initial_accumulator);
  spec.device.kind = parse_choice<device::BackendKind>(c.device, "device.kind");
  ASSERT_EQ(spec.model.embedding_dim, kDim);

  const std::string start = run_dir(spec.name) + "-0.h5", end = run_dir(spec.name) + "-n.h5";
  auto at_start = spec;
  at_start.name += "-start";
  train_steps(at_start, *world->comm, 0, start);
  train_steps(spec, *world->comm, steps, end);
  world->comm->barrier();

  const auto initial = weights_of(start);
  const auto trained = weights_of(end);
  ASSERT_EQ(initial.size(), trained.size());
  ASSERT_GE(initial.size(), 4u + 4u);
  Reference reference(initial, c.options);
  for (const data::Batch& b : global_batches(spec, steps)) reference.step(b);
  const auto expected = reference.tensors(initial);

  for (std::size_t i = 0; i < trained.size(); ++i) {
    SCOPED_TRACE(trained[i].name);
    double diff = 0, scale = 0, change_diff = 0, change = 0;
    for (std::size_t j = 0; j < trained[i].values.size(); ++j) {
      const double got = trained[i].values[j], want = expected[i].values[j], was = initial[i].values[j];
      diff = std::max(diff, std::abs(got - want));
      scale = std::max(scale, std::abs(want));
      change_diff = std::max(change_diff, std::abs((got - was) - (want - was)));
      change = std::max(change, std::abs(want - was));
    }
    EXPECT_LE(diff, 1e-5 * scale);
    EXPECT_GT(change, 0) << "the steps did not move this tensor";
    EXPECT_LE(change_diff, 1e-3 * change);
  }
}

// Adagrad starts from an accumulator of 0.1: from 0 its first step is lr * sign(g) for every
// gradient, and fp32 and float64 may disagree on the sign of one that is rounding noise.
INSTANTIATE_TEST_SUITE_P(
    Cases, DcnReference,
    testing::Values(Case{"sgd-low-onehot", "train.h5", "cpu", {2, 3, "sgd", "sgd", 0.1, 1e-8, 0}},
                    Case{"sgd-full-multihot", "multi.h5", "cpu", {2, 0, "sgd", "sgd", 0.1, 1e-8, 0}},
                    Case{"adagrad-low-multihot", "multi.h5", "cpu", {3, 4, "adagrad", "adagrad", 0.05, 1e-8, 0.1}},
                    Case{"adagrad-rowwise-full", "multi.h5", "cpu", {2, 0, "adagrad", "rowwise_adagrad", 0.05, 1e-8, 0.1}},
                    Case{"strict-sgd-low-multihot", "multi.h5", "cpu-strict", {2, 3, "sgd", "sgd", 0.1, 1e-8, 0}},
                    Case{"strict-adagrad-full-onehot", "train.h5", "cpu-strict", {2, 0, "adagrad", "adagrad", 0.05, 1e-8, 0.1}}),
    [](const testing::TestParamInfo<Case>& info) {
      std::string name = info.param.label;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

const int registered = register_world();

}  // namespace
