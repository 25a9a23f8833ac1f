// Times, in one run and interleaved, (a) the bare GEMM chain of a DLRM training step (forward,
// weight-gradient and input-gradient GEMMs of every layer of the bottom and top MLPs, through
// the same Backend::gemm) and (b) the full dense step: both MLPs forward and backward, the
// interaction, the loss and its gradient, and the SGD update. Medians over repetitions.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/common/bench_util.hpp"
#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "mlp/cpu/threading.hpp"
#include "mlp/dense_optimizer.hpp"
#include "mlp/interaction.hpp"
#include "mlp/loss.hpp"
#include "mlp/mlp.hpp"

using namespace recmix;

namespace {

using bench::fill;
using bench::GemmChain;
using bench::median;
using bench::now;

// Forwards to a backend and adds up the wall time spent in its GEMMs, to split a dense step into
// GEMM and everything else.
class GemmTimingBackend final : public device::Backend {
 public:
  explicit GemmTimingBackend(device::Backend& inner) : inner_(inner) {}
  double gemm_seconds = 0;

  device::BackendKind kind() const override { return inner_.kind(); }
  std::string description() const override { return inner_.description(); }
  device::GemmLibrary gemm_library() const override { return inner_.gemm_library(); }
  bool host_accessible(device::Tier tier) const override { return inner_.host_accessible(tier); }
  bool runs_kernels_on_host() const override { return inner_.runs_kernels_on_host(); }
  bool runs_fine_items() const override { return inner_.runs_fine_items(); }
  void begin_device_work() override { inner_.begin_device_work(); }
  void end_device_work() noexcept override { inner_.end_device_work(); }
  void* do_allocate(std::size_t bytes, device::Tier tier) override { return inner_.allocate(bytes, tier); }
  void do_deallocate(void* p, device::Tier tier) noexcept override { inner_.deallocate(p, tier); }
  void do_copy(void* dst, const void* src, std::size_t bytes, device::Stream& s) override {
    inner_.copy(dst, src, bytes, s);
  }
  void do_fill_zero(void* dst, std::size_t bytes, device::Stream& s) override { inner_.fill_zero(dst, bytes, s); }
  std::unique_ptr<device::Stream> do_create_stream() override { return inner_.create_stream(); }
  std::unique_ptr<device::Event> do_create_event() override { return inner_.create_event(); }
  void do_gemm(device::Stream& s, bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    double t = now();
    inner_.gemm(s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm_seconds += now() - t;
  }
  void do_gemm_half(device::Stream& s, half::Storage type, bool ta, bool tb, int m, int n, int k, float alpha, const std::uint16_t* a,
                 int lda, const std::uint16_t* b, int ldb, float beta, float* c, int ldc) override {
    double t = now();
    inner_.gemm_half(s, type, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm_seconds += now() - t;
  }
  device::HalfGemmPath last_half_gemm_path() const override { return inner_.last_half_gemm_path(); }
  void set_num_threads(int threads) override { inner_.set_num_threads(threads); }
  int num_threads() const override { return inner_.num_threads(); }

 private:
  device::Backend& inner_;
};

struct DenseStep {
  device::Backend& backend;
  int batch, tables, dim;
  mlp::Mlp bottom;
  std::unique_ptr<mlp::Interaction> interaction;
  mlp::Mlp top;
  std::unique_ptr<mlp::DenseOptimizer> sgd;
  device::Buffer<float> dense, embeddings, labels, grad_prob, grad_bottom, grad_embeddings;
  double last_loss = 0;

  DenseStep(device::Backend& b, device::MemoryPool& pool, const std::vector<int>& bottom_sizes,
            std::vector<int> top_sizes, int batch_size, int num_tables)
      : backend(b), batch(batch_size), tables(num_tables), dim(bottom_sizes.back()),
        bottom(b, pool, "bottom", bottom_sizes, mlp::Activation::relu, 1, batch_size),
        interaction(mlp::make_interaction(mlp::InteractionKind::dot, b, pool, num_tables, dim, batch_size)),
        top(b, pool, "top", (top_sizes.insert(top_sizes.begin(), interaction->out_features()), top_sizes),
            mlp::Activation::sigmoid, 2, batch_size),
        dense(pool, std::size_t(batch) * bottom_sizes.front()),
        embeddings(pool, std::size_t(batch) * tables * dim),
        labels(pool, batch),
        grad_prob(pool, batch),
        grad_bottom(pool, std::size_t(batch) * dim),
        grad_embeddings(pool, std::size_t(batch) * tables * dim) {
    auto params = bottom.parameters();
    for (auto& p : top.parameters()) params.push_back(p);
    mlp::DenseOptimizerConfig c;
    c.kind = DenseOptimizerKind::sgd;
    c.lr = 0.01f;
    sgd = mlp::make_dense_optimizer(c, b, pool, params);
    fill(dense.data(), dense.size(), 0.f, 3.f, 4);
    fill(embeddings.data(), embeddings.size(), -0.01f, 0.01f, 5);
    fill(labels.data(), labels.size(), 0.f, 1.f, 6);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = labels[i] < 0.25f ? 1.f : 0.f;
  }

  // phase_seconds (when given) accumulates the time of each of the 8 phases.
  void run(device::Stream& s, double* phase_seconds = nullptr) {
    double t = phase_seconds ? now() : 0;
    auto mark = [&](int phase) {
      if (!phase_seconds) return;
      double t1 = now();
      phase_seconds[phase] += t1 - t;
      t = t1;
    };
    const float* b = bottom.forward(s, dense.data(), batch);
    mark(0);
    const float* z = interaction->forward(s, b, embeddings.data(), batch);
    mark(1);
    const float* p = top.forward(s, z, batch);
    mark(2);
    last_loss = mlp::bce_loss(backend, s, p, labels.data(), batch);
    mlp::bce_loss_backward(backend, s, p, labels.data(), batch, 1.f / batch, grad_prob.data());
    mark(3);
    const float* gz = top.backward(s, grad_prob.data(), true);
    mark(4);
    interaction->backward(s, gz, grad_bottom.data(), grad_embeddings.data());
    mark(5);
    bottom.backward(s, grad_bottom.data(), false);
    mark(6);
    sgd->step(s);
    mark(7);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Dense DLRM step vs the bare GEMM chain (Kaggle model's dense part)"};
  std::vector<int> batches = {128, 2048};
  int threads = 2, reps = 15;
  double min_seconds = 0.2;
  app.add_option("--batch", batches, "batch sizes");
  app.add_option("--threads", threads, "threads (OpenBLAS and OpenMP)");
  app.add_option("--reps", reps, "repetitions (median reported)");
  app.add_option("--min-seconds", min_seconds, "minimum time per repetition and variant");
  bool breakdown = false;
  std::int64_t parallel_threshold = mlp::cpu_parallel_threshold();
  std::int64_t compare_threshold = 0;
  app.add_option("--parallel-threshold", parallel_threshold,
                 "element-wise kernels touching this many floats use all threads");
  app.add_option("--compare-threshold", compare_threshold,
                 "also time the dense step with this threshold, interleaved (0: no)");
  app.add_flag("--breakdown", breakdown, "also print the time of each phase of the dense step");
  CLI11_PARSE(app, argc, argv);

  const std::vector<int> bottom_sizes = {13, 512, 256, 64, 16};
  const std::vector<int> top_hidden = {512, 256, 1};
  const int tables = 26;

  mlp::set_cpu_parallel_threshold(parallel_threshold);
  auto backend = device::make_backend(device::BackendKind::cpu, threads);
  auto stream = backend->create_stream();
  fmt::print("backend: {}\n", backend->description());
  fmt::print("bottom 13-512-256-64-16, dot interaction over {} tables of dim 16 -> {}, top {}-512-256-1, "
             "BCE, SGD; medians of {} repetitions\n\n",
             tables, mlp::interaction_out_features(mlp::InteractionKind::dot, tables, 16),
             mlp::interaction_out_features(mlp::InteractionKind::dot, tables, 16), reps);
  fmt::print("| batch | GEMM chain samples/s | dense step samples/s | dense / GEMM chain |\n");
  fmt::print("|---:|---:|---:|---:|\n");
  for (int batch : batches) {
    device::MemoryPool pool(*backend, device::Tier::device, "bench");
    std::vector<int> top_sizes = {mlp::interaction_out_features(mlp::InteractionKind::dot, tables, 16)};
    top_sizes.insert(top_sizes.end(), top_hidden.begin(), top_hidden.end());
    GemmChain chain(*backend, pool, {bottom_sizes, top_sizes}, batch);
    DenseStep step(*backend, pool, bottom_sizes, top_hidden, batch, tables);
    // Iterations per timing so that each lasts about min_seconds.
    chain.run(*stream);
    step.run(*stream);
    double t0 = now();
    chain.run(*stream);
    int iters = std::max(3, static_cast<int>(min_seconds / std::max(now() - t0, 1e-6)));
    std::vector<double> chain_rate, step_rate, ratio, alt_rate, alt_ratio;
    for (int r = 0; r < reps; ++r) {
      double a0 = now();
      for (int i = 0; i < iters; ++i) chain.run(*stream);
      double a = (now() - a0) / iters;
      double b0 = now();
      for (int i = 0; i < iters; ++i) step.run(*stream);
      double b = (now() - b0) / iters;
      chain_rate.push_back(batch / a);
      step_rate.push_back(batch / b);
      ratio.push_back(a / b);
      if (compare_threshold > 0) {
        mlp::set_cpu_parallel_threshold(compare_threshold);
        double c0 = now();
        for (int i = 0; i < iters; ++i) step.run(*stream);
        double c = (now() - c0) / iters;
        mlp::set_cpu_parallel_threshold(parallel_threshold);
        alt_rate.push_back(batch / c);
        alt_ratio.push_back(a / c);
      }
    }
    fmt::print("| {} | {:.0f} | {:.0f} | {:.3f} |\n", batch, median(chain_rate), median(step_rate),
               median(ratio));
    if (compare_threshold > 0)
      fmt::print("|   threaded from {} floats | | {:.0f} | {:.3f} |\n", compare_threshold,
                 median(alt_rate), median(alt_ratio));
    if (breakdown) {
      // The dense step again on a backend that times its GEMMs: the rest is the non-GEMM cost.
      GemmTimingBackend timed(*backend);
      device::MemoryPool timed_pool(timed, device::Tier::device, "bench timed");
      DenseStep timed_step(timed, timed_pool, bottom_sizes, top_hidden, batch, tables);
      std::vector<double> shares;
      for (int r = 0; r < reps; ++r) {
        timed.gemm_seconds = 0;
        double t0 = now();
        for (int i = 0; i < iters; ++i) timed_step.run(*stream);
        double total = now() - t0;
        shares.push_back(1.0 - timed.gemm_seconds / total);
      }
      fmt::print("    non-GEMM share of the dense step: {:.1f}% (median)\n", 100 * median(shares));
      static const char* names[] = {"bottom forward", "interaction forward", "top forward", "loss",
                                    "top backward", "interaction backward", "bottom backward",
                                    "sgd update"};
      double phases[8] = {};
      for (int i = 0; i < iters * 3; ++i) step.run(*stream, phases);
      double total = 0;
      for (double p : phases) total += p;
      for (int i = 0; i < 8; ++i)
        fmt::print("    {:<22} {:8.1f} us/step {:5.1f}%\n", names[i], 1e6 * phases[i] / (iters * 3),
                   100 * phases[i] / total);
    }
    std::fflush(stdout);
  }
  return 0;
}
