// The fused linear-layer GEMMs of the CPU backend (mlp/cpu/linear.hpp) against what they replace:
// Backend::gemm (OpenBLAS, beta = 0) followed by a pass of the element-wise work (bias and ReLU
// forward; the ReLU mask and its column sums backward). Layer by layer, on the Kaggle DLRM's
// shapes, one thread, the caches flushed before each call (as in a training step, where every
// operand was last touched several layers ago) or warm. Medians over repetitions, interleaved.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <vector>

#include "bench/common/bench_util.hpp"
#include "device/backend.hpp"
#include "mlp/cpu/linear.hpp"

using namespace recmix;

int main(int argc, char** argv) {
  CLI::App app{"Fused linear-layer GEMMs vs the backend GEMM (OpenBLAS or oneDNN) plus an element-wise pass, per layer"};
  int rows = 1024, reps = 15;
  bool warm = false;
  app.add_option("--rows", rows, "rows per call (a replica's share of the batch)");
  app.add_option("--reps", reps, "repetitions (median reported)");
  app.add_flag("--warm", warm, "do not flush the caches between calls");
  std::string gemm = "auto";
  app.add_option("--gemm", gemm, "the GEMM library the fused kernels are compared with: auto, openblas or onednn")
      ->check(CLI::IsMember({"auto", "openblas", "onednn"}));
  CLI11_PARSE(app, argc, argv);
  if (!mlp::cpu::fused_linear_available()) {
    fmt::print("the fused kernels need AVX2 and FMA; this CPU has not both\n");
    return 0;
  }
  auto backend = device::make_backend(device::BackendKind::cpu, 1, device::parse_cpu_gemm(gemm));
  auto stream = backend->create_stream();
  std::vector<float> junk(std::size_t(64) << 20 >> 2);  // 64 MB, twice the L3
  auto flush = [&] {
    if (warm) return;
    for (std::size_t i = 0; i < junk.size(); i += 16) junk[i] += 1.f;
  };
  auto time = [&](auto&& f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      flush();
      const double t0 = bench::now();
      f();
      t.push_back(bench::now() - t0);
    }
    return bench::median(t) * 1e6;
  };
  fmt::print("{}; {} rows, caches {}; medians of {} calls, us\n\n", backend->description(), rows,
             warm ? "warm" : "flushed", reps);
  fmt::print("| layer | forward: GEMM + pass | fused | input gradient: GEMM + pass | fused | fused used |\n"
             "|---|---:|---:|---:|---:|---|\n");
  const int shapes[][2] = {{13, 512}, {512, 256}, {256, 64}, {64, 16}, {367, 512}, {512, 256}, {256, 1}};
  double sum[4] = {0, 0, 0, 0};
  for (const auto& s : shapes) {
    const int in = s[0], out = s[1];
    std::vector<float> x(std::size_t(rows) * in), w(std::size_t(out) * in), b(out), y(std::size_t(rows) * out);
    std::vector<float> dz(std::size_t(rows) * out), dx(std::size_t(rows) * in), mask(std::size_t(rows) * in), sums(in);
    std::vector<float> pack(mlp::cpu::linear_pack_floats(in, out));
    bench::fill(x.data(), x.size(), -1.f, 1.f, 1);
    bench::fill(w.data(), w.size(), -0.1f, 0.1f, 2);
    bench::fill(b.data(), b.size(), -0.1f, 0.1f, 3);
    bench::fill(dz.data(), dz.size(), -1.f, 1.f, 4);
    bench::fill(mask.data(), mask.size(), -1.f, 1.f, 5);
    double t[4] = {0, 0, 0, 0};
    for (int round = 0; round < 2; ++round) {  // interleaved: each variant timed twice, the better kept
      const double f0 = time([&] {
        backend->gemm(*stream, false, true, rows, out, in, 1.f, x.data(), in, w.data(), in, 0.f, y.data(), out);
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < out; ++c) {
            const float v = y[std::size_t(r) * out + c] + b[c];
            y[std::size_t(r) * out + c] = v > 0.f ? v : 0.f;
          }
      });
      const double f1 = time([&] {
        mlp::cpu::linear_forward(1, rows, in, out, x.data(), in, w.data(), b.data(), mlp::Activation::relu,
                                 y.data(), pack.data());
      });
      const double b0 = time([&] {
        backend->gemm(*stream, false, false, rows, in, out, 1.f, dz.data(), out, w.data(), in, 0.f, dx.data(), in);
        for (int c = 0; c < in; ++c) sums[c] = 0.f;
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < in; ++c) {
            const std::size_t i = std::size_t(r) * in + c;
            dx[i] = mask[i] > 0.f ? dx[i] : 0.f;
            sums[c] += dx[i];
          }
      });
      const double b1 = time([&] {
        mlp::cpu::linear_backward_input(1, rows, in, out, dz.data(), w.data(), mask.data(), sums.data(), dx.data(),
                                        pack.data());
      });
      const double v[4] = {f0, f1, b0, b1};
      for (int i = 0; i < 4; ++i) t[i] = round == 0 ? v[i] : std::min(t[i], v[i]);
    }
    const bool fwd = mlp::cpu::fused_forward_pays(in, out, backend->gemm_library()),
               bwd = mlp::cpu::fused_input_gradient_pays(in, out, backend->gemm_library());
    fmt::print("| {} -> {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {} |\n", in, out, t[0], t[1], t[2], t[3],
               fwd && bwd ? "both" : fwd ? "forward" : bwd ? "input gradient" : "neither");
    for (int i = 0; i < 4; ++i) sum[i] += t[i];
  }
  fmt::print("| all | {:.0f} | {:.0f} | {:.0f} | {:.0f} | |\n", sum[0], sum[1], sum[2], sum[3]);
  return 0;
}
