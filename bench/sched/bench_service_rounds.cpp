// The round time of recmix run's scheduler service at scale: the service's own code (admission,
// rounds, events, status) driven by synthetic ranks instead of trained jobs. Each started launch
// sends one sample a rank every sample interval and its ranks' "finished" reports once its steps'
// time (steps x --step-ms) has passed; "stop" ends a launch at once. Prints the service's own
// figures (rounds, mean and max round time, messages) and the wall time of the whole run.
//
//   bench_service_rounds --ranks 16384 --jobs 10000 --ranks-per-node 8 [--policy complementary]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "data/synth.hpp"
#include "runtime/run/job_file.hpp"
#include "runtime/run/messages.hpp"
#include "runtime/run/scheduler_service.hpp"

using namespace recmix;
using namespace recmix::runtime::run;
namespace fs = std::filesystem;

namespace {

double wall() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Ranks that run no training: a launch "runs" for its steps' time, sampling as a job would.
class SyntheticRanks final : public SchedulerLink {
 public:
  SyntheticRanks(int ranks, double step_s) : ranks_(ranks), step_s_(step_s) {}
  int size() const override { return ranks_; }

  void send_to_executor(int rank, const Message& m) override {
    (void)rank;
    if (m.kind == "start") {
      const JobPlacement p = JobPlacement::from_json(m.body);
      if (launches_.count(p.launch)) return;  // the same start reaches every rank of the job
      const JobSpecSteps steps = steps_of(p);
      launches_[p.launch] = {p.job, p.ranks, wall(), wall() + steps.total * step_s_, p.sample_interval_s, wall(), steps.total};
    } else if (m.kind == "stop") {
      if (auto it = launches_.find(launch_of(m)); it != launches_.end()) it->second.end = 0;
    }
  }

  std::optional<Message> poll_scheduler() override {
    if (out_.empty()) produce();
    if (out_.empty()) return std::nullopt;
    Message m = std::move(out_.front());
    out_.pop_front();
    return m;
  }

 private:
  struct JobSpecSteps {
    std::int64_t total = 0;
  };
  struct Launch {
    std::int64_t job = -1;
    std::vector<int> ranks;
    double begin = 0, end = 0, interval = 1, next_sample = 0;
    std::int64_t steps = 0;
  };

  static JobSpecSteps steps_of(const JobPlacement& p) {
    const auto spec = runtime::parse_run_job(p.spec_text, p.origin, p.base_dir);
    return {spec.spec.train.steps};
  }

  // The messages due now: samples of the launches whose interval is over, reports of those done.
  void produce() {
    const double now = wall();
    for (auto it = launches_.begin(); it != launches_.end();) {
      Launch& l = it->second;
      const bool done = now >= l.end;
      const auto step = static_cast<std::int64_t>(std::min<double>(l.steps, (now - l.begin) / step_s_));
      if (done || now >= l.next_sample) {
        for (int r : l.ranks) {
          JobSample s;
          s.launch = it->first;
          s.rank = r;
          s.step = done ? l.steps : step;
          s.total_steps = l.steps;
          s.step_s = step_s_;
          s.loss = 0.5;
          s.pool_current_bytes = s.pool_peak_bytes = 1 << 20;
          s.busy_share = 1;
          out_.push_back({"sample", l.job, r, s.to_json()});
        }
        l.next_sample = now + l.interval;
      }
      if (done) {
        for (std::size_t k = 0; k < l.ranks.size(); ++k) {
          JobReport rep;
          rep.launch = it->first;
          rep.rank = l.ranks[k];
          rep.job_rank = static_cast<int>(k);
          rep.steps = l.steps;
          rep.loss = 0.5;
          rep.pool_peak_bytes = 1 << 20;
          out_.push_back({"finished", l.job, l.ranks[k], rep.to_json()});
        }
        it = launches_.erase(it);
      } else {
        ++it;
      }
    }
  }

  int ranks_;
  double step_s_;
  std::map<int, Launch> launches_;
  std::deque<Message> out_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"recmix run's scheduler service at scale, driven by synthetic ranks"};
  int ranks = 1024, jobs = 1000, per_node = 8;
  double step_ms = 1.0, arrival_span_s = 5.0;
  std::int64_t steps = 2000;
  std::string policy = "complementary", work = "/tmp/recmix-bench-service";
  app.add_option("--ranks", ranks, "Ranks (GPUs)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--jobs", jobs, "Jobs: 1, 2, 4 or 8 ranks at 70/15/10/5%")->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-node", per_node, "Ranks a node")->check(CLI::Range(1, 1 << 16));
  app.add_option("--steps", steps, "Steps a job (its mean; 0.5-1.5x, drawn)");
  app.add_option("--step-ms", step_ms, "Milliseconds a step of the synthetic ranks");
  app.add_option("--arrivals-over", arrival_span_s, "Seconds over which the jobs arrive");
  app.add_option("--policy", policy, "Scheduling policy");
  app.add_option("--work", work, "Scratch folder (its run directory is replaced)");
  CLI11_PARSE(app, argc, argv);
  if (ranks % per_node != 0) {
    std::fprintf(stderr, "--ranks must be whole nodes of --ranks-per-node\n");
    return 2;
  }

  fs::remove_all(work);
  fs::create_directories(work);
  const std::string train = (fs::path(work) / "train.h5").string();
  data::SynthOptions so;
  so.output = train;
  so.rows = 20000;
  so.num_dense = 4;
  so.table_rows = {100, 50};
  data::synthesize(so);

  RunOptions options;
  options.run_dir = (fs::path(work) / "run").string();
  options.jobs.scheduler.policy = policy;
  options.jobs.scheduler.round_interval_s = 1.0;
  options.jobs.scheduler.progress_interval_s = 1e9;
  options.jobs.scheduler.stall_warning_s = 0;
  options.cores_per_rank = 2;
  options.quiet = true;
  options.nodes.ranks_per_node = per_node;
  for (int n = 0; n < ranks / per_node; ++n) options.nodes.hosts.push_back(fmt::format("node{}", n));
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  const double t0 = wall();
  for (int i = 0; i < jobs; ++i) {
    const double x = u(rng);
    const int job_ranks = std::min(ranks, x < 0.70 ? 1 : x < 0.85 ? 2 : x < 0.95 ? 4 : 8);
    const auto job_steps = static_cast<std::int64_t>(static_cast<double>(steps) * (0.5 + u(rng)));
    const std::string text = fmt::format(
        "name = \"j{}\"\nranks = {}\narrival = {:.3f}\n[model]\nembedding_dim = 4\nbottom_mlp = [8, 4]\n"
        "top_mlp = [8, 1]\n[data]\ntrain = \"{}\"\n[train]\nbatch_size = 64\nsteps = {}\n",
        i, job_ranks, arrival_span_s * i / jobs, train, job_steps);
    options.jobs.jobs.push_back(runtime::parse_run_job(text, fmt::format("job {}", i), work));
  }
  SyntheticRanks link(ranks, step_ms / 1e3);
  SchedulerService service(link, std::move(options));
  const double t1 = wall();
  const nlohmann::json s = service.run();
  const double t2 = wall();
  const auto& c = s["control_plane"];
  std::size_t finished = 0;
  for (const auto& j : s["jobs"]) finished += j["state"] == "finished";
  std::printf("ranks %d (%d nodes of %d), jobs %d (%zu finished), policy %s: %lld rounds, mean %.2f ms, max %.2f ms; "
              "%lld messages; admission %.1f s, run %.1f s\n",
              ranks, ranks / per_node, per_node, jobs, finished, policy.c_str(), c["rounds"].get<long long>(),
              c["mean_round_ms"].get<double>(), c["max_round_ms"].get<double>(), c["messages_received"].get<long long>(),
              t1 - t0, t2 - t1);
  const auto& l = c["longest_round"];
  std::printf("longest round at t = %.2f s: refit %.2f ms, policy and starts %.2f ms, %zu queued, %d started; "
              "%lld refits, mean %.2f ms\n",
              l["t"].get<double>(), l["refit_ms"].get<double>(), l["policy_ms"].get<double>(),
              l["queued"].get<std::size_t>(), l["starts"].get<int>(), c["refits"].get<long long>(),
              c["mean_refit_ms"].get<double>());
  return finished == static_cast<std::size_t>(jobs) ? 0 : 1;
}
