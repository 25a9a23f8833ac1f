#include "sched/measured_pairs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <tuple>
#include <vector>
#include <nlohmann/json.hpp>
#include <ostream>

#include "core/error.hpp"
#include "sched/csv.hpp"

namespace recmix::sched {
namespace {

// Sums of one type's samples alone, or beside one other type, each sample weighted by the steps
// it covers (w: their sum), so that the mean step time is the time of those steps over their count.
struct Sums {
  double step = 0, dense = 0, embedding = 0, allreduce = 0, wait = 0, busy = 0, w = 0;
  int n = 0;
};

double field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

std::string job_type_of(std::string_view job_name) {
  return std::string(job_name.substr(0, job_name.find('.')));
}

MeasuredPairs measure_pairs(const std::vector<std::string>& run_dirs) {
  std::map<std::string, Sums> alone, neighbour;
  std::map<std::pair<std::string, std::string>, Sums> beside;
  struct Sample {
    nlohmann::json e;
    std::string job;
    int rank;
    double t;
  };
  for (const auto& dir : run_dirs) {
    std::map<std::tuple<std::string, int, int>, double> last_step;  // (job, rank, launch) -> step
    const std::string path = (std::filesystem::path(dir) / "events.jsonl").string();
    std::ifstream in(path);
    RECMIX_REQUIRE(in, IoError, fmt::format("cannot open '{}' (is '{}' a recmix run directory?)", path, dir));
    std::string line;
    double round_s = 0.5;
    std::vector<Sample> samples;
    for (std::size_t n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      nlohmann::json e;
      try {
        e = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& x) {
        throw DataError(fmt::format("{}:{}: not JSON ({})", path, n, x.what()));
      }
      const std::string event = e.value("event", "");
      if (event == "run_start" && field(e, "round_interval_s") > 0) round_s = field(e, "round_interval_s");
      if (event != "sample") continue;
      std::string job = e.value("job", "");
      const int rank = e.value("rank", 0);
      const double t = field(e, "t");
      samples.push_back({std::move(e), std::move(job), rank, t});
    }
    // Whether another job had a sample near t on a rank this job does not run on: a busy
    // neighbour rank. (On a rank of its own, another job is a partner of its sample there.)
    const double window = 1.5 * round_s;
    auto near = [&](const Sample& a, const Sample& b) { return std::abs(a.t - b.t) <= window; };
    // Samples in time order, so that each looks only at the few within its window (a long run
    // holds many thousands of samples).
    std::vector<std::size_t> by_time(samples.size());
    std::iota(by_time.begin(), by_time.end(), std::size_t{0});
    std::stable_sort(by_time.begin(), by_time.end(), [&](auto a, auto b) { return samples[a].t < samples[b].t; });
    std::vector<double> times;
    for (auto i : by_time) times.push_back(samples[i].t);
    // Whether f(o) holds for a sample o near s (a slightly wider search, then near() itself).
    auto any_near = [&](const Sample& s, const auto& f) {
      const double slack = 1e-9 * (1 + std::abs(s.t) + window);
      const auto lo = std::lower_bound(times.begin(), times.end(), s.t - window - slack) - times.begin();
      const auto hi = std::upper_bound(times.begin(), times.end(), s.t + window + slack) - times.begin();
      for (auto k = lo; k < hi; ++k)
        if (const Sample& o = samples[by_time[static_cast<std::size_t>(k)]]; near(o, s) && f(o)) return true;
      return false;
    };
    auto runs_on = [&](const Sample& s, int rank) {
      return any_near(s, [&](const Sample& o) { return o.job == s.job && o.rank == rank; });
    };
    auto busy_elsewhere = [&](const Sample& s) {
      return any_near(s, [&](const Sample& o) { return o.rank != s.rank && o.job != s.job && !runs_on(s, o.rank); });
    };
    for (const Sample& sample : samples) {
      const nlohmann::json& e = sample.e;
      const auto partners = e.value("partners", std::vector<std::string>{});
      if (partners.size() > 1) continue;
      const double step = field(e, "step_s");
      if (!(step > 0)) continue;
      const std::string type = job_type_of(sample.job);
      // The steps since the job's previous sample on this rank in this launch (since the start
      // for its first: a first interval holds the slower first steps, so it counts for as many
      // steps as it holds and no more); 1 for samples without a step count.
      double w = 1;
      if (const auto it = e.find("step"); it != e.end() && it->is_number()) {
        const double at = it->get<double>();
        auto [last, first] = last_step.try_emplace({sample.job, sample.rank, e.value("launch", 0)}, 0.0);
        w = at - last->second;
        last->second = at;
        if (!(w > 0)) w = 1;
      }
      Sums& s = !partners.empty()          ? beside[{type, job_type_of(partners[0])}]
                : busy_elsewhere(sample) ? neighbour[type]
                                         : alone[type];
      s.step += w * step;
      s.dense += w * field(e, "dense_s") / step;
      s.embedding += w * field(e, "embedding_s") / step;
      s.allreduce += w * field(e, "allreduce_update_s") / step;
      s.wait += w * field(e, "data_wait_s") / step;
      s.busy += w * field(e, "busy_share");
      s.w += w;
      ++s.n;
    }
  }
  // A type never alone on an idle node: its samples beside a busy rank are its baseline.
  for (auto it = neighbour.begin(); it != neighbour.end();)
    if (!alone.count(it->first)) {
      alone[it->first] = it->second;
      it = neighbour.erase(it);
    } else {
      ++it;
    }
  MeasuredPairs out;
  for (const auto& [type, s] : alone)
    out.types.push_back({type, s.step / s.w, s.dense / s.w, s.embedding / s.w, s.allreduce / s.w, s.wait / s.w,
                         s.busy / s.w, s.n});
  for (const auto& [key, s] : beside) {
    const auto solo = alone.find(key.first);
    if (solo == alone.end()) continue;  // no baseline: no slowdown
    const double colocated = s.step / s.w;
    out.pairs.push_back({key.first, key.second, colocated, colocated / (solo->second.step / solo->second.w), s.n});
  }
  for (const auto& [type, s] : neighbour) {
    const Sums& solo = alone.at(type);
    out.neighbours.push_back({type, s.step / s.w, (s.step / s.w) / (solo.step / solo.w), s.n});
  }
  return out;
}

void write_pairs_csv(const MeasuredPairs& pairs, std::ostream& out) {
  out << "type,other,solo_step_s,colocated_step_s,slowdown,samples,dense_share,embedding_share,allreduce_share,"
         "data_wait_share,busy_share\n";
  std::map<std::string, double> solo;
  for (const auto& t : pairs.types) {
    solo[t.type] = t.solo_step_s;
    out << fmt::format("{},,{:.9g},,1,{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n", t.type, t.solo_step_s, t.samples,
                       t.dense_share, t.embedding_share, t.allreduce_share, t.data_wait_share, t.busy_share);
  }
  for (const auto& p : pairs.pairs)
    out << fmt::format("{},{},{:.9g},{:.9g},{:.9g},{},,,,,\n", p.type, p.other, solo[p.type], p.colocated_step_s,
                       p.slowdown, p.samples);
  for (const auto& n : pairs.neighbours)
    out << fmt::format("{},{},{:.9g},{:.9g},{:.9g},{},,,,,\n", n.type, kBusyNeighbour, solo[n.type], n.step_s,
                       n.slowdown, n.samples);
}

MeasuredPairs read_pairs_csv(const std::string& path) {
  MeasuredPairs out;
  CsvReader csv(path);
  std::map<std::string, double> solo;
  for (CsvRow row; csv.next(row);) {
    const std::string& type = row.text("type");
    if (type.empty()) throw DataError(fmt::format("{}:{}: empty type", path, row.line()));
    const std::string& other = row.text("other");
    const int samples = static_cast<int>(row.number("samples"));
    if (other.empty()) {
      MeasuredType t{type,
                     row.number("solo_step_s"),
                     row.number_or("dense_share", 0),
                     row.number_or("embedding_share", 0),
                     row.number_or("allreduce_share", 0),
                     row.number_or("data_wait_share", 0),
                     row.number_or("busy_share", 0),
                     samples};
      if (!(t.solo_step_s > 0))
        throw DataError(fmt::format("{}:{}: solo_step_s of '{}' must be above 0", path, row.line(), type));
      solo[type] = t.solo_step_s;
      out.types.push_back(t);
      continue;
    }
    if (other == kBusyNeighbour) {
      MeasuredNeighbour b{type, row.number("colocated_step_s"), row.number("slowdown"), samples};
      if (!(b.slowdown > 0))
        throw DataError(fmt::format("{}:{}: slowdown of '{}' beside a busy rank must be above 0", path, row.line(), type));
      out.neighbours.push_back(b);
      continue;
    }
    MeasuredPair p{type, other, row.number("colocated_step_s"), row.number("slowdown"), samples};
    if (!(p.slowdown > 0))
      throw DataError(fmt::format("{}:{}: slowdown of '{}' beside '{}' must be above 0", path, row.line(), type, other));
    out.pairs.push_back(p);
  }
  for (const auto& p : out.pairs)
    if (!solo.count(p.type))
      throw DataError(fmt::format("{}: the pair ('{}', '{}') has no line for '{}' alone", path, p.type, p.other, p.type));
  for (const auto& n : out.neighbours)
    if (!solo.count(n.type))
      throw DataError(fmt::format("{}: the line of '{}' beside a busy rank has no line for '{}' alone", path, n.type,
                                  n.type));
  return out;
}

UtilisationVector measured_utilisation(const MeasuredType& t) {
  UtilisationVector u;
  u[Resource::compute] = std::min(1.0, t.dense_share + t.embedding_share);
  u[Resource::host_cpu] = std::min(1.0, t.busy_share);
  u[Resource::network] = std::min(1.0, t.allreduce_share);
  return u;
}

PairDataset to_pair_dataset(const MeasuredPairs& pairs, std::string source) {
  PairDataset d;
  d.source = std::move(source);
  for (const auto& t : pairs.types) {
    SoloProfile p;
    p.util = measured_utilisation(t);
    p.speed = 1.0 / t.solo_step_s;
    d.solo[t.type] = p;
  }
  for (const auto& p : pairs.pairs) d.pairs.push_back({p.type, p.other, p.slowdown});
  for (const auto& n : pairs.neighbours) d.busy_neighbour[n.type] = n.slowdown;
  return d;
}

}  // namespace recmix::sched
