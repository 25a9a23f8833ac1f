#include "runtime/run/job_file.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "sched/sim/cluster_config.hpp"

#include "core/error.hpp"
#include "sched/policy.hpp"

namespace recmix::runtime {
namespace fs = std::filesystem;
namespace {

toml::table parse_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column,
                                  e.description()));
  }
}

std::string base_of(const std::string& path) {
  auto parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Takes ranks, priority and arrival out of a job table; the rest is the trainer's job spec.
RunJob take_run_keys(toml::table table, const std::string& origin, const std::string& base_dir) {
  RunJob job;
  job.origin = origin;
  job.base_dir = base_dir;
  auto fail = [&](const std::string& key, const std::string& what) {
    throw ConfigError(fmt::format("{}: '{}' {}", origin, key, what));
  };
  if (auto* n = table.get("ranks")) {
    if (!n->is_integer()) fail("ranks", "must be an integer");
    const auto v = *n->value<std::int64_t>();
    if (v < 1 || v > 4096) fail("ranks", fmt::format("must be between 1 and 4096 (got {})", v));
    job.ranks = static_cast<int>(v);
  }
  if (auto* n = table.get("priority")) {
    if (!n->is_integer()) fail("priority", "must be an integer");
    job.priority = static_cast<int>(*n->value<std::int64_t>());
  }
  if (auto* n = table.get("arrival")) {
    if (!n->is_number()) fail("arrival", "must be a number of seconds");
    job.arrival_s = *n->value<double>();
    if (!(job.arrival_s >= 0)) fail("arrival", fmt::format("must be >= 0 seconds (got {})", job.arrival_s));
  }
  for (const char* key : {"ranks", "priority", "arrival"}) table.erase(key);
  std::ostringstream text;
  text << table;
  job.spec_text = text.str();
  job.spec = parse_job_spec(job.spec_text, origin, base_dir);
  return job;
}

// [cluster] in a live run: the nodes are the world's, so only the network is set here; the keys
// are read by the simulator's own [cluster] reader.
LiveNetwork parse_network(const toml::table& t, const std::string& origin) {
  for (auto&& [key, node] : t) {
    const std::string k(key.str());
    if (k != "machine" && k != "intra_node_gbps" && k != "inter_node_gbps")
      throw ConfigError(fmt::format("{}: 'cluster.{}' is not a key of a live run's [cluster] (known: machine, "
                                    "intra_node_gbps, inter_node_gbps; the nodes, ranks and memory are the world's "
                                    "and [scheduler]'s)",
                                    origin, k));
  }
  const sched::ClusterSpec spec = sched::read_cluster_table(t, origin, sched::ClusterSpec{});
  LiveNetwork out;
  if (auto* m = t.get("machine")) out.machine = *m->value<std::string>();
  out.intra_node_gbps = spec.intra_node_bandwidth / 1e9;
  out.inter_node_gbps = spec.inter_node_bandwidth / 1e9;
  return out;
}

SchedulerSettings parse_scheduler(const toml::table& t, const std::string& origin) {
  SchedulerSettings s;
  auto fail = [&](const std::string& key, const std::string& what) {
    throw ConfigError(fmt::format("{}: 'scheduler.{}' {}", origin, key, what));
  };
  auto number = [&](const std::string& key, double& out, double lo, double hi) {
    if (auto* n = t.get(key)) {
      if (!n->is_number()) fail(key, "must be a number");
      const double v = *n->value<double>();
      if (!(v >= lo && v <= hi)) fail(key, fmt::format("must be between {} and {} (got {})", lo, hi, v));
      out = v;
    }
  };
  auto integer = [&](const std::string& key, int& out, int lo, int hi) {
    if (auto* n = t.get(key)) {
      if (!n->is_integer()) fail(key, "must be an integer");
      const auto v = *n->value<std::int64_t>();
      if (v < lo || v > hi) fail(key, fmt::format("must be between {} and {} (got {})", lo, hi, v));
      out = static_cast<int>(v);
    }
  };
  for (auto&& [key, node] : t) {
    static const std::set<std::string> known = {"policy",         "round_interval_s", "colocation_limit",
                                                "memory_capacity", "slowdown_limit",   "cores_per_rank",
                                                "las_threshold_s", "las_lease_s",      "memory_headroom",
                                                "stuck_timeout_s", "stall_warning_s", "progress_interval_s",
                                                "delay_min_s",    "delay_max_s"};
    if (!known.count(std::string(key.str())))
      fail(std::string(key.str()), "is an unknown key (known: policy, round_interval_s, colocation_limit, "
                                   "memory_capacity, memory_headroom, slowdown_limit, cores_per_rank, las_threshold_s, "
                                   "las_lease_s, delay_min_s, delay_max_s, stuck_timeout_s, stall_warning_s, "
                                   "progress_interval_s)");
  }
  if (auto* n = t.get("policy")) {
    if (!n->is_string()) fail("policy", "must be a string");
    s.policy = *n->value<std::string>();
    try {
      sched_policy_name(s.policy);
    } catch (const ConfigError& e) {
      fail("policy", e.what());
    }
  }
  number("round_interval_s", s.round_interval_s, 0.01, 3600);
  integer("colocation_limit", s.colocation_limit, 1, 8);
  number("slowdown_limit", s.slowdown_limit, 1.0, 100);
  integer("cores_per_rank", s.cores_per_rank, 0, 4096);
  number("memory_headroom", s.memory_headroom, 0.01, 100);
  number("stuck_timeout_s", s.stuck_timeout_s, 0.1, 1e6);
  number("stall_warning_s", s.stall_warning_s, 0, 1e6);
  number("progress_interval_s", s.progress_interval_s, 0.01, 3600);
  number("las_threshold_s", s.las_threshold_s, 0, 1e9);
  number("las_lease_s", s.las_lease_s, 0.01, 1e9);
  number("delay_min_s", s.delay_min_s, 0, 1e9);
  number("delay_max_s", s.delay_max_s, 0, 1e9);
  if (s.delay_max_s < s.delay_min_s)
    fail("delay_max_s", fmt::format("must be at least delay_min_s ({})", s.delay_min_s));
  if (auto* n = t.get("memory_capacity")) {
    if (n->is_integer()) {
      const auto v = *n->value<std::int64_t>();
      if (v <= 0) fail("memory_capacity", "must be positive");
      s.memory_capacity = static_cast<std::uint64_t>(v);
    } else if (n->is_string()) {
      s.memory_capacity = parse_byte_size(*n->value<std::string>(), "scheduler.memory_capacity");
    } else {
      fail("memory_capacity", "must be a size (\"8GiB\") or a number of bytes");
    }
  }
  return s;
}

void parse_into(JobFile& out, const std::string& text, const std::string& origin, const std::string& base_dir,
                int depth, bool top);

// An included file: a job file (it has [[job]] or include) or a single job spec.
void include_file(JobFile& out, const std::string& path, const std::string& origin, int depth) {
  if (depth > 8) throw ConfigError(fmt::format("{}: includes nest more than 8 deep (a cycle?)", origin));
  if (!fs::exists(path)) throw ConfigError(fmt::format("{}: included file '{}' does not exist", origin, path));
  const std::string text = read_text_file(path, "included file");
  const auto table = parse_toml(text, path);
  if (table.contains("job") || table.contains("include"))
    parse_into(out, text, path, base_of(path), depth + 1, false);
  else
    out.jobs.push_back(take_run_keys(table, path, base_of(path)));
}

void parse_into(JobFile& out, const std::string& text, const std::string& origin, const std::string& base_dir,
                int depth, bool top) {
  const auto table = parse_toml(text, origin);
  for (auto&& [key, node] : table) {
    const std::string k(key.str());
    if (k == "job" || k == "include" || ((k == "scheduler" || k == "cluster") && top)) continue;
    if (k == "scheduler" || k == "cluster")
      throw ConfigError(fmt::format("{}: [{}] belongs in the top-level jobs file, not in an included one", origin, k));
    throw ConfigError(fmt::format("{}: '{}' is an unknown key of a jobs file (known: job, include, scheduler, cluster; "
                                  "the keys of one job go inside [[job]])",
                                  origin, k));
  }
  // The file's own [[job]] tables first, then the included files' jobs, each in order.
  if (auto* jobs = table.get("job")) {
    const auto* list = jobs->as_array();
    if (!list || !list->is_array_of_tables())
      throw ConfigError(fmt::format("{}: 'job' must be an array of tables ([[job]])", origin));
    int index = 0;
    for (const auto& item : *list) {
      ++index;
      const auto& t = *item.as_table();
      std::string name;
      if (auto* n = t.get("name"); n && n->is_string()) name = *n->value<std::string>();
      const std::string where =
          name.empty() ? fmt::format("{}, [[job]] {}", origin, index) : fmt::format("{}, [[job]] {} ('{}')", origin, index, name);
      if (name.empty()) throw ConfigError(fmt::format("{}: every job needs a 'name'", where));
      out.jobs.push_back(take_run_keys(t, where, base_dir));
    }
  }
  if (auto* inc = table.get("include")) {
    const auto* list = inc->as_array();
    if (!list) throw ConfigError(fmt::format("{}: 'include' must be a list of file names", origin));
    for (const auto& item : *list) {
      if (!item.is_string()) throw ConfigError(fmt::format("{}: 'include' must be a list of file names", origin));
      include_file(out, resolve_path(*item.value<std::string>(), base_dir), origin, depth);
    }
  }
  if (top)
    if (auto* sched = table.get("scheduler")) {
      if (!sched->is_table()) throw ConfigError(fmt::format("{}: 'scheduler' must be a table", origin));
      out.scheduler = parse_scheduler(*sched->as_table(), origin);
    }
  if (top)
    if (auto* cluster = table.get("cluster")) {
      if (!cluster->is_table()) throw ConfigError(fmt::format("{}: 'cluster' must be a table", origin));
      out.network = parse_network(*cluster->as_table(), origin);
    }
}

}  // namespace

std::string sched_policy_name(const std::string& name) {
  if (name == "exclusive-fifo" || name == "fifo") return "fifo";
  for (const auto& n : sched::policy_names())
    if (n == name) return n;
  throw ConfigError(fmt::format("unknown policy '{}' (known: exclusive-fifo, memory-first, complementary, "
                                "interference-aware, delay, las)",
                                name));
}

JobFile parse_job_file(const std::string& toml_text, const std::string& origin, const std::string& base_dir) {
  JobFile out;
  parse_into(out, toml_text, origin, base_dir, 0, true);
  if (out.jobs.empty()) throw ConfigError(fmt::format("{}: no jobs ([[job]] tables or include = [...])", origin));
  check_unique_names(out.jobs);
  return out;
}

JobFile load_job_file(const std::string& path) {
  return parse_job_file(read_text_file(path, "jobs file"), path, base_of(path));
}

RunJob parse_run_job(const std::string& toml_text, const std::string& origin, const std::string& base_dir) {
  auto table = parse_toml(toml_text, origin);
  if (table.contains("job") || table.contains("include"))
    throw ConfigError(fmt::format("{}: one job spec expected here (top-level keys, as for recmix train), not a jobs file",
                                  origin));
  return take_run_keys(std::move(table), origin, base_dir);
}

RunJob load_run_job(const std::string& path) { return parse_run_job(read_text_file(path, "job spec"), path, base_of(path)); }

void check_run_job(const RunJob& job, int world_ranks) {
  if (job.ranks > world_ranks)
    throw ConfigError(fmt::format("{}: job '{}' asks for {} ranks, the run has {}", job.origin, job.spec.name,
                                  job.ranks, world_ranks));
  for (const auto* files : {&job.spec.data.train, &job.spec.data.eval})
    for (const auto& f : *files)
      if (!fs::exists(f))
        throw ConfigError(fmt::format("{}: job '{}': data file '{}' does not exist", job.origin, job.spec.name, f));
  if (job.spec.data.train.empty())
    throw ConfigError(fmt::format("{}: job '{}' has no training data ('data.train')", job.origin, job.spec.name));
  if (job.spec.train.batch_size < job.ranks)
    throw ConfigError(fmt::format("{}: job '{}': 'train.batch_size' = {} is smaller than its ranks ({})", job.origin,
                                  job.spec.name, job.spec.train.batch_size, job.ranks));
}

void check_unique_names(const std::vector<RunJob>& jobs) {
  std::set<std::string> seen;
  for (const auto& j : jobs)
    if (!seen.insert(j.spec.name).second)
      throw ConfigError(fmt::format("{}: a job named '{}' exists already (job names must be unique in a run)", j.origin,
                                    j.spec.name));
}

}  // namespace recmix::runtime
