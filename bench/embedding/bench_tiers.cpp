// The embedding layer's hot/cold tiers against untiered tables, on one rank of the CPU backend.
// For Zipf-distributed lookups (exponents 0.8, 1.05, 1.2; one-hot and multi-hot bags) and hot
// fractions of 1-20%: the hit rate, the rows and bytes moved between the tiers per step against
// fetching every lookup from the host tier, and the step time against untiered. Then the layer
// at four times its device memory: a device pool of a quarter of the tables refuses the untiered
// layer, and the tiered one trains within it. On this backend both tiers are host memory, so the
// times measure the tiers' bookkeeping and copies, not a PCIe transfer (bench/RESULTS.md).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/common/timing.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "data/synth.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

enum class Bagging { one_hot, multi_hot };
const char* name(Bagging b) { return b == Bagging::one_hot ? "one-hot" : "multi-hot"; }

struct Settings {
  int tables = 26, dim = 16, batch = 2048, threads = 1, steps = 40, warmup = 3, block = 6, max_bag = 8, count_batches = 400;
  std::int64_t rows = 1000000;
  std::uint64_t seed = 1;
  double pcie_gb_per_s = 25;  // assumed host <-> device bandwidth for the PCIe estimate
};

// The share of Zipf(exponent) lookups that fall on the `hot` most popular of `rows` rows: the hit
// rate of a hot set chosen with exact knowledge of the distribution.
class IdealHits {
 public:
  IdealHits(std::int64_t rows, double exponent) : prefix_(std::size_t(rows) + 1, 0.0) {
    for (std::size_t k = 1; k < prefix_.size(); ++k) prefix_[k] = prefix_[k - 1] + std::pow(double(k), -exponent);
  }
  double operator()(std::int64_t hot) const {
    hot = std::clamp<std::int64_t>(hot, 0, std::int64_t(prefix_.size()) - 1);
    return prefix_[std::size_t(hot)] / prefix_.back();
  }

 private:
  std::vector<double> prefix_;
};

// A fixed bijection of a table's rows, r -> (r * stride + offset) mod rows with stride prime to
// rows, so that the popular Zipf ranks are spread over the table instead of being its lowest rows.
class RowMap {
 public:
  RowMap(std::uint64_t rows, std::uint64_t offset) : rows_(rows), offset_(offset % rows) {
    stride_ = 2654435761u;  // a prime; stepped on while it shares a factor with rows
    while (std::gcd(stride_, rows_) != 1) stride_ += 2;
    stride_ %= rows_;
  }
  std::int64_t operator()(std::int64_t rank) const {
    __extension__ using u128 = unsigned __int128;  // GCC/Clang extension, silenced for -Wpedantic
    return static_cast<std::int64_t>((u128(rank) * stride_ + offset_) % rows_);
  }

 private:
  std::uint64_t rows_, offset_, stride_ = 0;
};

// One step's lookups in both layouts.
struct Batch {
  std::vector<std::int32_t> one_hot;                        // [batch x tables], the dataset's layout
  std::vector<std::vector<std::int64_t>> offsets, indices;  // multi-hot: one CSR per table
  std::int64_t multi_hot_lookups = 0;
};

// The "dataset" of one Zipf exponent: the batches the layers train on (warm-up, then timed), and
// per bagging the access counts of a separate set of batches from the same distribution (what a
// dataset's /access_counts would hold), which pick the hot rows.
struct Workload {
  double exponent;
  std::vector<Batch> batches;
  std::vector<std::vector<std::int64_t>> counts[2];
};

Workload make_workload(const Settings& s, double exponent, int which) {
  Workload w{exponent, {}, {}};
  const data::ZipfSampler zipf(s.rows, exponent);
  std::mt19937_64 rng(s.seed * 1000003u + std::uint64_t(which));
  auto uniform = [&rng] { return double(rng() >> 11) * 0x1.0p-53; };
  std::vector<RowMap> maps;
  for (int t = 0; t < s.tables; ++t) maps.emplace_back(std::uint64_t(s.rows), rng());
  auto bag_size = [&] { return 1 + int(rng() % std::uint64_t(s.max_bag)); };

  for (auto& c : w.counts) c.assign(s.tables, std::vector<std::int64_t>(std::size_t(s.rows), 0));
  for (int c = 0; c < s.count_batches; ++c)
    for (int b = 0; b < s.batch; ++b)
      for (int t = 0; t < s.tables; ++t) {
        ++w.counts[0][t][std::size_t(maps[t](zipf(uniform)))];
        for (int k = bag_size(); k > 0; --k) ++w.counts[1][t][std::size_t(maps[t](zipf(uniform)))];
      }

  // A layer's batches: warm-up, timed steps, and the untimed first step of each block.
  w.batches.resize(std::size_t(s.warmup + s.steps + (s.steps + s.block - 2) / (s.block - 1)));
  for (Batch& batch : w.batches) {
    batch.one_hot.resize(std::size_t(s.batch) * s.tables);
    batch.offsets.assign(s.tables, std::vector<std::int64_t>(std::size_t(s.batch) + 1, 0));
    batch.indices.assign(s.tables, {});
    for (int b = 0; b < s.batch; ++b)
      for (int t = 0; t < s.tables; ++t) {
        batch.one_hot[std::size_t(b) * s.tables + t] = static_cast<std::int32_t>(maps[t](zipf(uniform)));
        for (int k = bag_size(); k > 0; --k) batch.indices[t].push_back(maps[t](zipf(uniform)));
        batch.offsets[t][std::size_t(b) + 1] = std::int64_t(batch.indices[t].size());
      }
    for (const auto& idx : batch.indices) batch.multi_hot_lookups += std::int64_t(idx.size());
  }
  return w;
}

// One configuration's figures, per timed step.
struct Result {
  double exponent = 0;
  Bagging bagging = Bagging::one_hot;
  std::string config;
  double hot_fraction = 0;         // asked for (0: untiered, or set by device_budget)
  std::uint64_t device_budget = 0;
  std::int64_t hot_rows_per_table = 0;  // device_budget: the device rows less the staging slots, per table
  double ideal_hit_rate = 1;       // the hit rate of the hot_rows_per_table truly most popular rows
  double step_ms = 0, forward_ms = 0, backward_ms = 0, staging_ms = 0, lookahead_wait_ms = 0;  // medians
  double lookups = 0, hit_rate = 1, rows_staged = 0, bytes_to_device = 0, bytes_to_host = 0;
  double bytes_fetch_all = 0;      // every lookup's row from the host tier and back: lookups x dim x 4 x 2
  double speed_vs_untiered = 0;    // untiered step time / this step time
  std::size_t device_bytes = 0, host_tier_bytes = 0, device_pool_capacity = 0;
  double build_s = 0;
};

// One layer (untiered or tiered) trained on a workload's batches, step by step, so that two
// layers can be timed in alternating blocks of steps: the machine's noise (other tenants, clock
// changes) then falls on both alike, and the ratio of their step times is what the bench reports.
class LayerRun {
 public:
  LayerRun(const Settings& s, const Workload& w, Bagging bagging, TierOptions tiering, std::size_t pool_capacity,
           comm::Communicator& comm, device::Backend& backend)
      : s_(s), w_(w), bagging_(bagging), pool_(backend, device::Tier::device, "bench device", pool_capacity),
        stream_(backend.create_stream()), out_(std::size_t(s.batch) * s.tables * s.dim), grad_(out_.size(), 1e-3f),
        bags_(std::size_t(s.tables)), next_bags_(std::size_t(s.tables)) {
    const std::vector<TableSpec> tables(std::size_t(s.tables), TableSpec{s.rows, s.dim});
    const double t0 = bench::now();
    emb_ = std::make_unique<ShardedEmbedding>(comm, backend, pool_, tables, Pooling::sum,
                                              ShardingPlan::automatic(tables, 1), SparseOptimizerConfig{SparseOptimizerKind::sgd, 0.01f}, s.seed,
                                              nullptr, std::move(tiering));
    build_s_ = bench::now() - t0;
  }

  // `steps` steps on the next batches (the workload's, cycled), timed when `timed`, except the
  // first: it starts without the lookahead (the block before it handed nothing over), as the
  // first step of a run does. The last hands nothing over either, so nothing of this layer runs
  // beside the other layer's block.
  void block(int steps, bool timed) {
    for (int k = 0; k < steps; ++k) step(k > 0, k + 1 < steps, timed && k > 0);
  }

  // Medians of the recorded steps, means of the tier counters.
  double median_step_ms() const { return bench::median(step_) * 1e3; }
  // Adds another layer's recorded steps to this one's (the untiered row sums up every pair).
  void take_times_from(const LayerRun& o) {
    fwd_.insert(fwd_.end(), o.fwd_.begin(), o.fwd_.end());
    bwd_.insert(bwd_.end(), o.bwd_.begin(), o.bwd_.end());
    step_.insert(step_.end(), o.step_.begin(), o.step_.end());
    staging_.insert(staging_.end(), o.staging_.begin(), o.staging_.end());
    wait_.insert(wait_.end(), o.wait_.begin(), o.wait_.end());
    lookups_ += o.lookups_;
    st_.add(o.st_);
  }

  Result result(Result r, const IdealHits& ideal) const {
    const double n = double(step_.size());
    r.build_s = build_s_;
    r.device_bytes = emb_->local_bytes();
    r.host_tier_bytes = emb_->host_tier_bytes();
    r.device_pool_capacity = pool_.capacity_bytes();
    r.forward_ms = bench::median(fwd_) * 1e3;
    r.backward_ms = bench::median(bwd_) * 1e3;
    r.step_ms = bench::median(step_) * 1e3;
    r.lookups = lookups_ / n;
    r.bytes_fetch_all = r.lookups * s_.dim * sizeof(float) * 2;
    r.hot_rows_per_table = s_.rows;
    if (emb_->tiered()) {
      const std::int64_t staging_per_table = std::min<std::int64_t>(
          s_.rows, std::int64_t(s_.batch) * (bagging_ == Bagging::one_hot ? 1 : s_.max_bag));
      r.hot_rows_per_table = r.device_budget > 0
                                 ? std::int64_t(r.device_bytes / (std::size_t(s_.dim) * sizeof(float))) / s_.tables -
                                       staging_per_table
                                 : hot_rows_for_fraction(s_.rows, r.hot_fraction);
      r.hit_rate = st_.lookups ? double(st_.hot_hits) / double(st_.lookups) : 0;
      r.rows_staged = double(st_.rows_staged) / n;
      r.bytes_to_device = double(st_.bytes_to_device) / n;
      r.bytes_to_host = double(st_.bytes_to_host) / n;
      r.staging_ms = bench::median(staging_) * 1e3;
      r.lookahead_wait_ms = bench::median(wait_) * 1e3;
    }
    r.ideal_hit_rate = ideal(r.hot_rows_per_table);
    return r;
  }

 private:
  // As the trainer drives the layer: the step's forward starts (its batch prefetched by the step
  // before when `ahead`), the next batch is handed over when `prefetch` (tiered: its cold rows
  // are gathered while this step computes; untiered: nothing), then the forward finishes and the
  // backward runs with a constant gradient.
  void step(bool ahead, bool prefetch, bool timed) {
    const std::size_t count = w_.batches.size();
    const Batch& batch = w_.batches[next_ % count];
    const Batch& next = w_.batches[(next_ + 1) % count];
    ++next_;
    const double a = bench::now();
    if (bagging_ == Bagging::one_hot) {
      const OneHotRows rows{batch.one_hot, s_.tables};
      if (ahead)
        emb_->forward_start_prefetched(*stream_, rows, s_.batch, out_.data());
      else
        emb_->forward_start(*stream_, rows, s_.batch, out_.data());
      if (prefetch) emb_->prefetch(OneHotRows{next.one_hot, s_.tables}, s_.batch);
    } else {
      for (int t = 0; t < s_.tables; ++t) bags_[std::size_t(t)] = {batch.offsets[t], batch.indices[t]};
      if (ahead)
        emb_->forward_start_prefetched(*stream_, bags_, s_.batch, out_.data());
      else
        emb_->forward_start(*stream_, bags_, s_.batch, out_.data());
      if (prefetch) {
        for (int t = 0; t < s_.tables; ++t) next_bags_[std::size_t(t)] = {next.offsets[t], next.indices[t]};
        emb_->prefetch(next_bags_, s_.batch);
      }
    }
    emb_->forward_finish(*stream_);
    const double b = bench::now();
    emb_->backward(*stream_, grad_.data());
    stream_->synchronize();
    const double c = bench::now();
    const TierStats this_step = emb_->take_tier_stats();
    if (!timed) return;
    fwd_.push_back(b - a);
    bwd_.push_back(c - b);
    step_.push_back(c - a);
    staging_.push_back(this_step.staging_s);
    wait_.push_back(this_step.lookahead_wait_s);
    st_.add(this_step);
    lookups_ += bagging_ == Bagging::one_hot ? double(s_.batch) * s_.tables : double(batch.multi_hot_lookups);
  }

  const Settings& s_;
  const Workload& w_;
  Bagging bagging_;
  device::MemoryPool pool_;
  std::unique_ptr<device::Stream> stream_;
  std::unique_ptr<ShardedEmbedding> emb_;
  std::vector<float> out_, grad_;
  std::vector<Bags> bags_, next_bags_;
  std::size_t next_ = 0;  // the next batch (cycled over the workload's)
  std::vector<double> fwd_, bwd_, step_, staging_, wait_;
  double lookups_ = 0, build_s_ = 0;
  TierStats st_;
};

// Times `tiered` against `untiered` in alternating blocks (warm-up steps first, untimed), until
// each has s.steps timed steps. Both layers are built for the pair: an older untiered layer can
// be slower (on this VM the kernel's DAMON page-out scheme splits the 2 MiB pages of memory it
// finds idle, and most rows of a Zipf-read table are idle for long stretches).
void run_pair(const Settings& s, LayerRun& untiered, LayerRun& tiered) {
  untiered.block(s.warmup, false);
  tiered.block(s.warmup, false);
  for (int timed = 0; timed < s.steps; timed += s.block - 1) {
    const int steps = std::min(s.block - 1, s.steps - timed) + 1;
    untiered.block(steps, true);
    tiered.block(steps, true);
  }
}

nlohmann::json to_json(const Result& r, const Settings& s) {
  const double moved = r.bytes_to_device + r.bytes_to_host;
  nlohmann::json j = {{"zipf", r.exponent},
                      {"bags", name(r.bagging)},
                      {"config", r.config},
                      {"hot_fraction", r.hot_fraction},
                      {"device_budget", r.device_budget},
                      {"hot_rows_per_table", r.hot_rows_per_table},
                      {"ideal_hit_rate", r.ideal_hit_rate},
                      {"device_pool_capacity", r.device_pool_capacity},
                      {"device_bytes", r.device_bytes},
                      {"host_tier_bytes", r.host_tier_bytes},
                      {"lookups_per_step", r.lookups},
                      {"hit_rate", r.hit_rate},
                      {"cold_rows_per_step", r.rows_staged},
                      {"bytes_to_device_per_step", r.bytes_to_device},
                      {"bytes_to_host_per_step", r.bytes_to_host},
                      {"bytes_moved_per_step", moved},
                      {"bytes_fetch_all_per_step", r.bytes_fetch_all},
                      {"step_ms", r.step_ms},
                      {"forward_ms", r.forward_ms},
                      {"backward_ms", r.backward_ms},
                      {"staging_ms_per_step", r.staging_ms},
                      {"lookahead_wait_ms_per_step", r.lookahead_wait_ms},
                      {"samples_per_s", r.step_ms > 0 ? s.batch / (r.step_ms * 1e-3) : 0.0},
                      {"pcie_ms_per_step", moved / (s.pcie_gb_per_s * 1e9) * 1e3},
                      {"pcie_gb_per_s_assumed", s.pcie_gb_per_s},
                      {"speed_vs_untiered", r.speed_vs_untiered},
                      {"build_s", r.build_s}};
  j["fetch_all_over_moved"] = moved > 0 ? nlohmann::json(r.bytes_fetch_all / moved) : nlohmann::json(nullptr);
  return j;
}

void print_header() {
  fmt::print("{:>5} {:>9} {:>10} {:>8} {:>6} {:>7} {:>12} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9}\n", "zipf",
             "bags", "config", "hot/tbl", "hit %", "ideal %", "cold rows/st", "moved MB", "fetch MB", "fetch/mv",
             "step ms", "vs untier", "stage ms", "pcie ms", "samples/s");
}

void print_row(const Result& r, const Settings& s) {
  const double moved = r.bytes_to_device + r.bytes_to_host;
  fmt::print(
      "{:>5.2f} {:>9} {:>10} {:>8} {:>6.2f} {:>7.2f} {:>12.0f} {:>9.3f} {:>9.3f} {:>8} {:>8.2f} {:>9.2f} {:>8.2f} "
      "{:>8.3f} {:>9.0f}\n",
      r.exponent, name(r.bagging), r.config, r.hot_rows_per_table, r.hit_rate * 100, r.ideal_hit_rate * 100,
      r.rows_staged, moved / 1e6, r.bytes_fetch_all / 1e6,
      moved > 0 ? fmt::format("{:.1f}", r.bytes_fetch_all / moved) : "-", r.step_ms, r.speed_vs_untiered,
      r.staging_ms, moved / (s.pcie_gb_per_s * 1e9) * 1e3, s.batch / (r.step_ms * 1e-3));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"embedding hot/cold tiers against untiered tables (one rank, CPU backend)"};
  Settings s;
  std::vector<double> exponents{0.8, 1.05, 1.2};
  std::vector<double> fractions{0.01, 0.05, 0.10, 0.20};
  app.add_option("--rows", s.rows, "rows per table");
  app.add_option("--tables", s.tables, "number of tables");
  app.add_option("--dim", s.dim, "embedding dim");
  app.add_option("--batch", s.batch, "global batch");
  app.add_option("--threads", s.threads, "CPU threads");
  app.add_option("--steps", s.steps, "timed steps of each layer (after 3 warm-up steps)");
  app.add_option("--block", s.block,
                 "steps per block: the untiered and the tiered layer alternate in blocks, the first step of each "
                 "untimed (it runs without the lookahead)");
  app.add_option("--max-bag", s.max_bag, "multi-hot bag sizes are uniform in [1, max-bag]");
  app.add_option("--count-batches", s.count_batches, "batches counted for the access counts (the hot set)");
  app.add_option("--zipf", exponents, "Zipf exponents");
  app.add_option("--hot", fractions, "hot fractions");
  app.add_option("--seed", s.seed, "seed of the indices and the weights");
  app.add_option("--pcie-gbps", s.pcie_gb_per_s, "assumed host <-> device GB/s for the PCIe time estimate");
  CLI11_PARSE(app, argc, argv);

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  try {
    auto comm = comm::make_mpi_world_communicator();
    RECMIX_REQUIRE(comm->size() == 1, ConfigError, "bench_tiers runs on one rank");
    RECMIX_REQUIRE(s.rows > 0 && s.rows <= INT32_MAX && s.tables > 0 && s.dim > 0 && s.batch > 0 && s.steps > 0 &&
                       s.max_bag > 0 && s.block >= 2 && !fractions.empty(),
                   ConfigError, "bench_tiers: rows in [1, 2^31), tables, dim, batch, steps and max-bag > 0, block >= 2, a hot fraction");
    auto backend = device::make_backend(device::BackendKind::cpu, s.threads);
    fmt::print("1 rank x {} thread(s), CPU backend, batch {}, {} tables x {} rows, dim {}, SGD lr 0.01, sum pooling; "
               "multi-hot bags of 1-{} indices; {} timed steps per layer after {} warm-ups (medians), each tiered layer "
               "alternating with the untiered one in blocks of {} steps (the first of each untimed); hot sets from "
               "the access "
               "counts of {} other batches\n",
               s.threads, s.batch, s.tables, s.rows, s.dim, s.max_bag, s.steps, s.warmup, s.block, s.count_batches);
    fmt::print(
        "hot/tbl: hot rows per table (4x budget: device rows less staging slots, per table). hit %: lookups on hot "
        "rows; ideal %: the Zipf share of that many truly most popular rows. moved: MB per step of weights (and "
        "state: none for SGD) host tier -> device tier (cold rows staged) + device -> host (written back). fetch: "
        "every lookup's row fetched from the host tier and written back, lookups x dim x 4 B x 2. fetch/mv = fetch "
        "/ moved. step ms: forward + backward. vs untier = the untiered layer's median step ms in the blocks it alternated with this layer / this step ms. stage ms: time a step spent "
        "staging and writing back. pcie ms: moved / {} GB/s (assumed). Times are medians, counters means.\n",
        s.pcie_gb_per_s);
    std::vector<Result> results;
    std::vector<std::string> oom;
    const double start = bench::now();
    for (std::size_t e = 0; e < exponents.size(); ++e) {
      const double t0 = bench::now();
      const Workload w = make_workload(s, exponents[e], int(e));
      const IdealHits ideal(s.rows, exponents[e]);
      fmt::print("\nZipf {}: workload generated in {:.1f} s\n", exponents[e], bench::now() - t0);
      print_header();
      for (Bagging bagging : {Bagging::one_hot, Bagging::multi_hot}) {
        const int mode = bagging == Bagging::one_hot ? 0 : 1;
        auto tier_options = [&](double fraction, std::uint64_t budget) {
          TierOptions o;
          o.hot_fraction = fraction;
          o.device_budget = budget;
          o.hot_set = HotSet::counts;
          o.global_batch = s.batch;
          o.bag_rows = bagging == Bagging::one_hot ? 1 : s.max_bag;  // the staging slots never grow
          o.table_counts = w.counts[mode];
          return o;
        };
        Result base;
        base.exponent = exponents[e];
        base.bagging = bagging;
        base.config = "untiered";
        std::unique_ptr<LayerRun> untiered;  // the first pair's, holding every pair's untiered steps
        std::vector<Result> rows;
        auto time_tiered = [&](Result r, TierOptions options, std::size_t capacity) {
          auto pair_untiered = std::make_unique<LayerRun>(s, w, bagging, TierOptions{}, 0, *comm, *backend);
          LayerRun tiered(s, w, bagging, std::move(options), capacity, *comm, *backend);
          run_pair(s, *pair_untiered, tiered);
          r = tiered.result(r, ideal);
          r.speed_vs_untiered = pair_untiered->median_step_ms() / r.step_ms;
          rows.push_back(r);
          if (untiered)
            untiered->take_times_from(*pair_untiered);
          else
            untiered = std::move(pair_untiered);
        };
        for (double f : fractions) {
          base.config = fmt::format("hot {:g}%", f * 100);
          base.hot_fraction = f;
          time_tiered(base, tier_options(f, 0), 0);
        }
        // 4x: a device pool of a quarter of the untiered tables. The untiered layer must not fit;
        // the tiered layer gets the whole pool as its budget (nothing else is allocated from it).
        base.config = "untiered";
        base.hot_fraction = 0;
        Result untiered_result = untiered->result(base, ideal);
        untiered_result.speed_vs_untiered = 1;
        const std::size_t capacity = untiered_result.device_bytes / 4;
        std::string refused = "the untiered layer was NOT refused";
        try {
          device::MemoryPool capped(*backend, device::Tier::device, "bench device", capacity);
          const std::vector<TableSpec> tables(std::size_t(s.tables), TableSpec{s.rows, s.dim});
          ShardedEmbedding untiered_capped(*comm, *backend, capped, tables, Pooling::sum,
                                           ShardingPlan::automatic(tables, 1), {SparseOptimizerKind::sgd, 0.01f}, s.seed);
          rc = 1;
        } catch (const OutOfMemoryError& err) {
          refused = fmt::format("OutOfMemoryError: {}", err.what());
        }
        oom.push_back(fmt::format("Zipf {} {}, device pool {}: {}", exponents[e], name(bagging),
                                  device::format_bytes(capacity), refused));
        base.config = "4x budget";
        base.device_budget = capacity;
        try {
          time_tiered(base, tier_options(0, capacity), capacity);
        } catch (const ConfigError& err) {  // small tables: the quarter is below the staging slots
          oom.back() += fmt::format("; the tiered layer was not built either: {}", err.what());
        }
        // The untiered row: over every block it ran (beside each tiered layer in turn).
        untiered_result = untiered->result(untiered_result, ideal);
        print_row(untiered_result, s);
        results.push_back(untiered_result);
        for (const Result& r : rows) {
          print_row(r, s);
          results.push_back(r);
        }
      }
    }
    fmt::print("\n4x case (device pool = a quarter of the untiered tables' bytes):\n");
    for (const auto& line : oom) fmt::print("  {}\n", line);
    fmt::print("\nOne JSON line per configuration:\n");
    for (const auto& r : results) fmt::print("{}\n", to_json(r, s).dump());
    fmt::print("\ntotal {:.0f} s\n", bench::now() - start);
  } catch (const std::exception& err) {
    fmt::print(stderr, "bench_tiers: {}\n", err.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
