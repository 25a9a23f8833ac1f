#include "sched/sim/measured_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace recmix::sched {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void note_file(std::vector<std::string>& files, const std::string& path) {
  if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
}

}  // namespace

MergedPairs read_pairs_files(const std::vector<std::string>& paths) {
  MergedPairs out;
  std::map<std::string, MeasuredType> solo;  // sums weighted by samples, then means
  std::map<std::string, double> weight;
  std::map<std::pair<std::string, std::string>, std::pair<MeasuredPair, std::string>> pairs;
  std::map<std::string, MeasuredNeighbour> neighbours;  // sums weighted by samples, then means
  for (const auto& path : paths) {
    const MeasuredPairs m = read_pairs_csv(path);
    for (const auto& n : m.neighbours) {
      const double w = std::max(1, n.samples);
      MeasuredNeighbour& s = neighbours.try_emplace(n.type, MeasuredNeighbour{n.type, 0, 0, 0}).first->second;
      s.step_s += w * n.step_s;
      s.slowdown += w * n.slowdown;
      s.samples += std::max(1, n.samples);
    }
    for (const auto& t : m.types) {
      note_file(out.files_of_type[t.type], path);
      const double w = std::max(1, t.samples);
      MeasuredType& s = solo.try_emplace(t.type, MeasuredType{t.type}).first->second;
      s.solo_step_s += w * t.solo_step_s;
      s.dense_share += w * t.dense_share;
      s.embedding_share += w * t.embedding_share;
      s.allreduce_share += w * t.allreduce_share;
      s.data_wait_share += w * t.data_wait_share;
      s.busy_share += w * t.busy_share;
      s.samples += t.samples;
      weight[t.type] += w;
    }
    for (const auto& p : m.pairs) {
      note_file(out.files_of_type[p.type], path);
      note_file(out.files_of_type[p.other], path);
      const auto [it, added] = pairs.try_emplace({p.type, p.other}, p, path);
      if (added) continue;
      const MeasuredPair& before = it->second.first;
      if (std::abs(before.slowdown - p.slowdown) <= 1e-9 * std::max(before.slowdown, p.slowdown)) continue;
      throw DataError(fmt::format(
          "the pair ('{}' beside '{}') is measured in both {} (slowdown {:.6g}) and {} (slowdown {:.6g}): give "
          "one of the two files, or merge the runs with recmix pairs",
          p.type, p.other, it->second.second, before.slowdown, path, p.slowdown));
    }
  }
  for (auto& [name, s] : solo) {
    const double w = weight[name];
    s.solo_step_s /= w;
    s.dense_share /= w;
    s.embedding_share /= w;
    s.allreduce_share /= w;
    s.data_wait_share /= w;
    s.busy_share /= w;
    out.pairs.types.push_back(s);
  }
  for (auto& [key, p] : pairs) out.pairs.pairs.push_back(p.first);
  for (auto& [name, n] : neighbours) {
    n.step_s /= n.samples;
    n.slowdown /= n.samples;
    out.pairs.neighbours.push_back(n);
  }
  return out;
}

std::map<std::string, std::string> parse_type_aliases(const std::vector<std::string>& args) {
  std::map<std::string, std::string> out;
  for (const auto& a : args) {
    const auto eq = a.find('=');
    RECMIX_REQUIRE(eq != std::string::npos && eq > 0 && eq + 1 < a.size(), ConfigError,
                   fmt::format("--pairs-type '{}': expected NAME=TYPE (a measured type name and a simulator job "
                               "type, e.g. kaggle-like=dlrm-small)",
                               a));
    const std::string name = a.substr(0, eq), type = a.substr(eq + 1);
    const auto [it, added] = out.emplace(name, type);
    RECMIX_REQUIRE(added || it->second == type, ConfigError,
                   fmt::format("--pairs-type maps '{}' twice: to '{}' and to '{}'", name, it->second, type));
  }
  return out;
}

MeasuredInput map_measured_pairs(const MergedPairs& merged, const std::vector<std::string>& files,
                                 const std::function<bool(const std::string&)>& is_sim_type,
                                 const std::map<std::string, std::string>& aliases) {
  MeasuredInput in;
  in.files = files;
  for (const auto& [name, type] : aliases) {
    RECMIX_REQUIRE(is_sim_type(type), ConfigError,
                   fmt::format("--pairs-type {}={}: '{}' is not a job type of the simulator (a DLRM preset: "
                               "dlrm-small, dlrm-medium, dlrm-large, dlrm-xlarge, dlrm-dcnv2, or a Lucid / Gavel type)",
                               name, type, type));
    if (!merged.files_of_type.count(name))
      in.warnings.push_back(fmt::format("--pairs-type {}={}: no type '{}' in {}", name, type, name, join(files)));
  }
  std::map<std::string, std::string> claimed;  // simulator type -> the measured name mapped to it
  for (const auto& [name, name_files] : merged.files_of_type) {
    std::string type;
    if (const auto a = aliases.find(name); a != aliases.end()) {
      type = a->second;
    } else if (is_sim_type(name)) {
      type = name;
    } else if (is_sim_type("dlrm-" + name)) {
      type = "dlrm-" + name;
    } else {
      in.warnings.push_back(fmt::format(
          "{}: measured type '{}' is not a job type of the simulator; its lines are left out (name the jobs after "
          "a DLRM preset, e.g. small.1 or dlrm-small.1, or map it with --pairs-type {}=dlrm-small)",
          join(name_files), name, name));
      continue;
    }
    const auto [it, added] = claimed.emplace(type, name);
    RECMIX_REQUIRE(added, ConfigError,
                   fmt::format("measured types '{}' ({}) and '{}' ({}) both map to the simulator's type '{}'",
                               it->second, join(merged.files_of_type.at(it->second)), name, join(name_files), type));
    in.mapping[name] = type;
  }
  MeasuredPairs mapped;
  for (const auto& t : merged.pairs.types) {
    const auto m = in.mapping.find(t.type);
    if (m == in.mapping.end()) continue;
    MeasuredType u = t;
    u.type = m->second;
    mapped.types.push_back(u);
    const UtilisationVector util = measured_utilisation(u);
    if (util.total() > 0 && u.solo_step_s > 0) in.profiles[u.type] = {util, u.solo_step_s};
  }
  for (const auto& p : merged.pairs.pairs) {
    const auto a = in.mapping.find(p.type), b = in.mapping.find(p.other);
    if (a == in.mapping.end() || b == in.mapping.end()) continue;
    MeasuredPair u = p;
    u.type = a->second;
    u.other = b->second;
    mapped.pairs.push_back(u);
  }
  for (const auto& n : merged.pairs.neighbours)
    if (const auto a = in.mapping.find(n.type); a != in.mapping.end()) {
      MeasuredNeighbour u = n;
      u.type = a->second;
      mapped.neighbours.push_back(u);
    }
  in.dataset = to_pair_dataset(mapped, "measured");
  return in;
}

}  // namespace recmix::sched
