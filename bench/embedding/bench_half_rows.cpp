// The CPU's 16-bit rows (embedding/half_rows_cpu.hpp), scalar against vectorised, side by side:
// ns per element to read a row to fp32 and to step it by SGD and round it back, for fp16 and bf16,
// to nearest and stochastically. Rows of `dim` elements, visited in a random order over a table
// of `rows` rows (the default, 2.6M x 16, is the Kaggle shape's 26 tables: far past the caches,
// as in training, and prefetched 16 rows ahead as the training loops do) or over one that fits in
// L2 (--rows 4096). The two paths alternate within each repetition; medians over repetitions.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/common/bench_util.hpp"
#include "core/half.hpp"
#include "embedding/cpu/half_rows.hpp"

using namespace recmix;
using namespace recmix::embedding;

int main(int argc, char** argv) {
  CLI::App app{"16-bit rows on the CPU: scalar against AVX-512 with F16C"};
  std::int64_t rows = 26 * 100000, dim = 16, visits = 1 << 20;
  int reps = 7;
  app.add_option("--rows", rows, "rows of the table");
  app.add_option("--dim", dim, "elements per row");
  app.add_option("--visits", visits, "rows visited per timing");
  app.add_option("--reps", reps, "repetitions (medians reported)");
  CLI11_PARSE(app, argc, argv);
  if (!cpu::half_rows_vectorised()) {
    fmt::print("this CPU has no AVX-512 (F, DQ, BW, VL) with F16C: only the scalar rows run here\n");
    return 0;
  }
  std::mt19937_64 rng(1);
  std::vector<std::int64_t> order(static_cast<std::size_t>(visits));
  std::uniform_int_distribution<std::int64_t> pick(0, rows - 1);
  for (auto& r : order) r = pick(rng);
  std::vector<float> grad(static_cast<std::size_t>(dim * 64)), out(static_cast<std::size_t>(dim));
  bench::fill(grad.data(), grad.size(), -1e-3f, 1e-3f, 2);
  std::vector<float> init(static_cast<std::size_t>(rows * dim));
  bench::fill(init.data(), init.size(), -0.01f, 0.01f, 3);

  fmt::print("{} rows x {}, {} random rows per timing, medians of {} repetitions (ns per element)\n\n", rows, dim,
             visits, reps);
  fmt::print("| storage | operation | scalar | AVX-512 + F16C | scalar / vectorised |\n|---|---|---:|---:|---:|\n");
  for (half::Storage s : {half::Storage::fp16, half::Storage::bf16}) {
    std::vector<std::uint16_t> table(init.size());
    for (std::size_t i = 0; i < init.size(); ++i) table[i] = kernels::float_to_half(s, init[i], false, 0u);
    struct Op {
      std::string name;
      bool stochastic;
      bool widen;
    };
    for (const Op& op : {Op{"read to fp32", false, true}, Op{"SGD, to nearest", false, false},
                         Op{"SGD, stochastic", true, false}}) {
      std::vector<double> ns[2], ratio;
      float sink = 0;
      for (int rep = 0; rep < reps; ++rep) {
        double t[2];
        for (int v = 0; v < 2; ++v) {
          const bool vectorised = v == 1;
          const cpu::RowRounding rounding{s, op.stochastic, half::rounding_key(7, 0, rep)};  // one table
          const double t0 = bench::now();
          for (std::int64_t i = 0; i < visits; ++i) {
            const std::int64_t r = order[static_cast<std::size_t>(i)];
            if (i + 16 < visits)  // as the training loops do: the row 16 visits ahead
              __builtin_prefetch(table.data() + order[static_cast<std::size_t>(i + 16)] * dim, 1);
            std::uint16_t* w = table.data() + r * dim;
            if (op.widen) {
              cpu::widen_half_row(s, w, out.data(), dim, vectorised);
              sink += out[0];
            } else {
              cpu::sgd_half_row(rounding, w, static_cast<std::uint64_t>(r * dim), grad.data() + (i % 64) * dim, dim, 0.01f,
                                vectorised);
            }
          }
          t[v] = (bench::now() - t0) * 1e9 / static_cast<double>(visits * dim);
          ns[v].push_back(t[v]);
        }
        ratio.push_back(t[0] / t[1]);
      }
      fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} |\n", half::to_string(s), op.name, bench::median(ns[0]),
                 bench::median(ns[1]), bench::median(ratio));
      if (sink == 12345.f) fmt::print(" ");
    }
  }
  return 0;
}
