#include "sched/sim/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include "core/error.hpp"

namespace recmix::sched {
namespace {

constexpr double kEps = 1e-9;

struct Event {
  double time;
  int kind;  // 0 finish, 1 wake, 2 external stop, 3 external requeue (job: the stop's index),
             // 4 profile update (job: the update's index)
  std::size_t job;
  std::uint64_t version;
  bool operator>(const Event& o) const { return time > o.time || (time == o.time && kind > o.kind); }
};

struct RunState {
  double progress = 0;     // solo seconds done
  double needed = 0;       // solo seconds to finish (work + restart overheads)
  double rate = 0;
  double last_update = 0;
  double queued_since = 0;
  std::uint64_t version = 0;
  bool running = false, finished = false, in_queue = false, started_this_round = false;
};

class Simulation final : public Actions {
 public:
  Simulation(const ClusterSpec& spec, std::vector<Job> jobs, Policy& policy, const SlowdownTruth& truth,
             InterferenceModel model, const SimOptions& options)
      : cluster_(spec), jobs_(std::move(jobs)), policy_(policy), truth_(truth), model_(std::move(model)),
        options_(options), state_(jobs_.size()) {
    // Workloads come by arrival already; sorting them again would move every job.
    const auto by_arrival = [this](const Job& a, const Job& b) { return queued_at(a) < queued_at(b); };
    if (!std::is_sorted(jobs_.begin(), jobs_.end(), by_arrival)) std::stable_sort(jobs_.begin(), jobs_.end(), by_arrival);
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      index_[jobs_[i].id] = i;
      state_[i].needed = jobs_[i].work_s;
      RECMIX_REQUIRE(jobs_[i].gpus <= cluster_.gpu_count(), ConfigError,
                     "job " + jobs_[i].name + " needs " + std::to_string(jobs_[i].gpus) + " GPUs; the cluster has " +
                         std::to_string(cluster_.gpu_count()));
      RECMIX_REQUIRE(jobs_[i].profile.peak_memory_bytes <= spec.gpu_memory_bytes, ConfigError,
                     "job " + jobs_[i].name + " needs more memory than a GPU has");
    }
    learn_ = options_.learn_online && policy_.learns_interference();
    result_.decisions.reserve(jobs_.size());  // at least one start per job
    const double span = jobs_.empty() ? 0 : jobs_.back().arrival_s;
    interval_ = options_.timeline_interval_s > 0 ? options_.timeline_interval_s : std::max(60.0, span / 1000.0);
    for (std::size_t k = 0; k < options_.external_stops.size(); ++k) {
      const ExternalStop& x = options_.external_stops[k];
      RECMIX_REQUIRE(index_.count(x.job) && x.requeue_s >= x.stop_s, ConfigError,
                     "simulate: an external stop names an unknown job or requeues it before it stops");
      events_.push({x.stop_s, 2, k, 0});
      events_.push({x.requeue_s, 3, k, 0});
    }
    for (std::size_t k = 0; k < options_.profile_updates.size(); ++k) {
      RECMIX_REQUIRE(index_.count(options_.profile_updates[k].job), ConfigError,
                     "simulate: a profile update names an unknown job");
      events_.push({options_.profile_updates[k].time_s, 4, k, 0});
    }
  }

  SimResult run() {
    const auto wall_start = std::chrono::steady_clock::now();
    std::size_t next_arrival = 0;
    while (finished_ < jobs_.size()) {
      double t = INFINITY;
      if (next_arrival < jobs_.size()) t = queued_at(jobs_[next_arrival]);
      if (!events_.empty()) t = std::min(t, events_.top().time);
      if (!std::isfinite(t)) break;  // nothing can happen any more
      advance(t);
      bool changed = false;
      while (next_arrival < jobs_.size() && queued_at(jobs_[next_arrival]) <= now_ + kEps) {
        enqueue(next_arrival++);
        changed = true;
        ++result_.events;
      }
      while (!events_.empty() && events_.top().time <= now_ + kEps) {
        const Event e = events_.top();
        events_.pop();
        ++result_.events;
        if (e.kind == 1) {
          pending_wakes_.erase(e.time);
          changed = true;
        } else if (e.kind == 2) {
          external_stop(options_.external_stops[e.job]);
        } else if (e.kind == 3) {
          external_requeue(options_.external_stops[e.job]);
          changed = true;
        } else if (e.kind == 4) {
          const ProfileUpdate& u = options_.profile_updates[e.job];
          Job& j = jobs_[index_.at(u.job)];
          cluster_.set_job_utilisation(j, u.util);
          if (j.type >= 0) model_.set_utilisation(j.type, u.util);
          if (const RunningJob* r = cluster_.running(j.id))
            for (int g : r->gpus) dirty_.push_back(g);
        } else if (state_[e.job].running && state_[e.job].version == e.version) {
          finish(e.job);
          changed = true;
        }
      }
      if (changed) schedule_rounds();
      update_rates();
      if (options_.progress && result_.events / options_.progress_every_events != last_progress_) {
        last_progress_ = result_.events / options_.progress_every_events;
        options_.progress(now_, finished_, jobs_.size());
      }
    }
    sample_timeline(now_, true);
    summarise();
    result_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return std::move(result_);
  }

  // --- Actions ---
  bool start(const Job& job, std::span<const int> gpus) override {
    const auto it = index_.find(job.id);
    RECMIX_REQUIRE(it != index_.end(), ConfigError, "policy started unknown job " + std::to_string(job.id));
    const std::size_t i = it->second;
    RunState& s = state_[i];
    if (s.running || s.finished || !s.in_queue || static_cast<int>(gpus.size()) != job.gpus) {
      ++result_.refused_starts;
      return false;
    }
    for (int g : gpus) {
      if (g >= 0 && g < cluster_.gpu_count() &&
          cluster_.memory_used(g) + job.profile.peak_memory_bytes > cluster_.spec().gpu_memory_bytes) {
        ++result_.memory_violations;
        return false;
      }
    }
    if (!cluster_.place(jobs_[i], gpus, now_)) {
      ++result_.refused_starts;
      return false;
    }
    Job& j = jobs_[i];
    if (j.first_start_s < 0) j.first_start_s = now_;
    queued_[i] += now_ - s.queued_since;
    s.running = true;
    s.started_this_round = true;
    ++started_this_round_;
    s.last_update = now_;
    s.rate = 0;
    const RunningJob* r = cluster_.running(j.id);
    if (r->spread()) spread_[i] = true;
    for (int g : gpus) {
      dirty_.push_back(g);
      result_.max_memory_fraction =
          std::max(result_.max_memory_fraction, cluster_.memory_used(g) / cluster_.spec().gpu_memory_bytes);
    }
    result_.decisions.push_back({now_, {Decision::Kind::start, j.id, std::vector<int>(gpus.begin(), gpus.end())}});
    policy_.on_start(j, *r, now_);
    return true;
  }

  void preempt(JobId id) override {
    const auto it = index_.find(id);
    RECMIX_REQUIRE(it != index_.end() && state_[it->second].running, ConfigError,
                   "policy preempted job " + std::to_string(id) + " which is not running");
    const std::size_t i = it->second;
    RunState& s = state_[i];
    settle(i);
    const RunningJob r = cluster_.remove(id);
    for (int g : r.gpus) dirty_.push_back(g);
    effective_sum_ -= s.rate * jobs_[i].gpus;
    jobs_[i].attained_gpu_s += jobs_[i].gpus * (now_ - r.start_s);
    ++jobs_[i].preemptions;
    ++result_.preemptions;
    result_.decisions.push_back({now_, {Decision::Kind::preempt, id, {}}});
    s.needed += options_.restart_overhead_s;
    s.running = false;
    s.rate = 0;
    ++s.version;
    s.queued_since = now_;
    preempted_.push_back(i);
  }

  // A replayed move-apart: the job leaves its GPUs as a preemption does, but not as a decision of
  // the policy's, and stays out of the queue until the live job's checkpoint was reported.
  void external_stop(const ExternalStop& x) {
    const std::size_t i = index_.at(x.job);
    RunState& s = state_[i];
    if (!s.running) return;
    settle(i);
    const RunningJob r = cluster_.remove(x.job);
    for (int g : r.gpus) dirty_.push_back(g);
    effective_sum_ -= s.rate * jobs_[i].gpus;
    jobs_[i].attained_gpu_s += jobs_[i].gpus * (now_ - r.start_s);
    ++jobs_[i].preemptions;
    s.needed += options_.restart_overhead_s;
    s.running = false;
    s.rate = 0;
    ++s.version;
    if (jobs_[i].type < 0) return;  // no type: nothing to learn
    if (x.slowed) {
      if (const auto o = index_.find(*x.slowed); o != index_.end() && jobs_[o->second].type >= 0)
        model_.observe(jobs_[o->second].type, jobs_[i].type, x.slowdown);
    } else {
      for (JobId other : x.avoid)
        if (const auto o = index_.find(other); o != index_.end() && jobs_[o->second].type >= 0)
          model_.observe(jobs_[i].type, jobs_[o->second].type, x.slowdown);
    }
    model_.refit();
  }

  void external_requeue(const ExternalStop& x) {
    const std::size_t i = index_.at(x.job);
    RunState& s = state_[i];
    if (s.running || s.finished || s.in_queue) return;
    for (JobId other : x.avoid)
      if (std::find(jobs_[i].avoid.begin(), jobs_[i].avoid.end(), other) == jobs_[i].avoid.end())
        jobs_[i].avoid.push_back(other);
    s.in_queue = true;
    s.queued_since = now_;
    requeue(&jobs_[i]);
  }

  void wake_at(double time) override {
    if (time <= now_ + kEps || pending_wakes_.count(time)) return;
    pending_wakes_.insert(time);
    events_.push({time, 1, 0, 0});
  }

 private:
  // When a job joins the queue: its arrival, or in a replay when the live service saw it arrive.
  double queued_at(const Job& job) const {
    if (options_.queue_times.empty()) return job.arrival_s;
    const auto it = options_.queue_times.find(job.id);
    return it != options_.queue_times.end() ? it->second : job.arrival_s;
  }

  // Moves simulated time to t, integrating utilisation and writing timeline samples.
  void advance(double t) {
    sample_timeline(t, false);
    const double dt = t - now_;
    busy_integral_ += dt * (cluster_.gpu_count() - cluster_.free_gpu_count());
    effective_integral_ += dt * effective_sum_;
    now_ = t;
  }

  void sample_timeline(double until, bool final_point) {
    while (next_sample_ <= until + kEps) {
      TimelinePoint p;
      p.time_s = next_sample_;
      p.busy_gpus = cluster_.gpu_count() - cluster_.free_gpu_count();
      p.running_jobs = static_cast<int>(cluster_.running_jobs().size());
      p.queued_jobs = static_cast<int>(queue_.size() - queue_head_);
      p.effective_util = effective_sum_ / cluster_.gpu_count();
      result_.timeline.push_back(p);
      next_sample_ += interval_;
      if (final_point) break;
    }
  }

  // Arrivals come in arrival order, so a job goes to the back unless it outranks the job there.
  void enqueue(std::size_t i) {
    state_[i].in_queue = true;
    state_[i].queued_since = now_;
    if (queue_.size() > queue_head_ && queue_before(&jobs_[i], queue_.back()))
      requeue(&jobs_[i]);
    else
      queue_.push_back(&jobs_[i]);
  }

  void settle(std::size_t i) {
    RunState& s = state_[i];
    s.progress += s.rate * (now_ - s.last_update);
    delivered_[i] += s.rate * (now_ - s.last_update);
    s.last_update = now_;
  }

  void finish(std::size_t i) {
    settle(i);
    RunState& s = state_[i];
    const RunningJob r = cluster_.remove(jobs_[i].id);
    for (int g : r.gpus) dirty_.push_back(g);
    effective_sum_ -= s.rate * jobs_[i].gpus;
    jobs_[i].attained_gpu_s += jobs_[i].gpus * (now_ - r.start_s);
    s.running = false;
    s.finished = true;
    s.rate = 0;
    ++finished_;
    finish_time_[i] = now_;
    policy_.on_finish(jobs_[i], now_);
  }

  void schedule_rounds() {
    for (int pass = 0; pass < 3; ++pass) {
      ++result_.rounds;
      preempted_.clear();
      const std::span<Job* const> waiting(queue_.data() + queue_head_, queue_.size() - queue_head_);
      SchedulingContext context{now_, cluster_, waiting, model_};
      policy_.schedule(context, *this);
      // Drop started jobs from the queue, put preempted ones back in queue order.
      if (started_this_round_ > 0) drop_started();
      started_this_round_ = 0;
      for (std::size_t i : preempted_) {
        state_[i].in_queue = true;
        requeue(&jobs_[i]);
      }
      if (preempted_.empty()) break;
    }
  }

  RunState& state_of(const Job* job) { return state_[static_cast<std::size_t>(job - jobs_.data())]; }

  // Removes the jobs started in this round from the queue, keeping the others' order. Policies
  // start jobs near the front (they scan in queue order), so only the part up to the last job
  // started is touched, not the whole queue: the jobs left in it move back to close the gaps
  // and the front of the queue moves up.
  void drop_started() {
    std::size_t end = queue_head_;  // one past the last job started
    for (std::size_t p = queue_head_, left = started_this_round_; p < queue_.size() && left > 0; ++p) {
      if (state_of(queue_[p]).started_this_round) {
        end = p + 1;
        --left;
      }
    }
    std::size_t out = end;
    for (std::size_t p = end; p-- > queue_head_;) {
      Job* j = queue_[p];
      RunState& s = state_of(j);
      if (s.started_this_round) {
        s.started_this_round = false;
        s.in_queue = false;
        continue;
      }
      queue_[--out] = j;
    }
    queue_head_ = out;
    // Reclaim the space before the front once it is half the vector.
    if (queue_head_ >= 1024 && 2 * queue_head_ >= queue_.size()) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));
      queue_head_ = 0;
    }
  }

  // Puts a job in queue order (queue_before), moving whichever side of it is shorter.
  void requeue(Job* job) {
    const auto front = queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_);
    const auto pos = std::lower_bound(front, queue_.end(), job, queue_before);
    if (queue_head_ > 0 && pos - front < queue_.end() - pos) {
      std::move(front, pos, front - 1);
      --queue_head_;
      *(pos - 1) = job;
    } else {
      queue_.insert(pos, job);
    }
  }

  // Recomputes the rate of every job on a GPU whose set of jobs changed.
  void update_rates() {
    if (dirty_.empty()) return;
    std::sort(dirty_.begin(), dirty_.end());
    dirty_.erase(std::unique(dirty_.begin(), dirty_.end()), dirty_.end());
    std::vector<std::size_t> affected;
    for (int g : dirty_) {
      const auto& on = cluster_.jobs_on(g);
      for (JobId id : on) affected.push_back(index_[id]);
      if (learn_ && on.size() == 2) observe_pair(on[0], on[1]);
      if (on.size() >= 2 && !options_.measured_runtimes) count_group(on);
    }
    // A measured busy-neighbour slowdown depends on the other GPUs of the node: a change on one
    // GPU changes the rates of the jobs on the node's other GPUs too.
    if (truth_.has_busy_neighbour() && !options_.measured_runtimes) {
      const int per_node = cluster_.spec().gpus_per_node;
      for (int g : dirty_) {
        const int first = cluster_.node_of(g) * per_node;
        for (int h = first; h < first + per_node; ++h)
          if (h != g)
            for (JobId id : cluster_.jobs_on(h)) affected.push_back(index_[id]);
      }
    }
    dirty_.clear();
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    std::vector<const Job*> co;
    for (std::size_t i : affected) {
      RunState& s = state_[i];
      settle(i);
      const Job& job = jobs_[i];
      const RunningJob* r = cluster_.running(job.id);
      double worst = 1.0;
      bool shared = false;  // a GPU of its own runs another job
      for (int g : r->gpus) {
        co.clear();
        for (JobId other : cluster_.jobs_on(g))
          if (other != job.id) co.push_back(&jobs_[index_[other]]);
        if (!co.empty()) {
          colocated_[i] = shared = true;
          if (!options_.measured_runtimes) worst = std::max(worst, truth_.slowdown(job, co));
        }
      }
      // Alone on its GPUs: measured pairs were taken beside an idle rank, so a busy neighbour
      // applies to a job alone only (a pair's slowdown stands as measured).
      if (!shared && truth_.has_busy_neighbour() && !options_.measured_runtimes && node_busy_beside(*r))
        worst = truth_.busy_neighbour(job);
      const double spread = options_.measured_runtimes ? 1.0 : spread_factor(cluster_.spec(), job.profile, r->nodes_used);
      const double rate = 1.0 / (worst * spread);
      effective_sum_ += (rate - s.rate) * job.gpus;
      s.rate = rate;
      ++s.version;
      const double remaining = std::max(0.0, s.needed - s.progress);
      const auto end = options_.end_times.find(job.id);
      events_.push({end != options_.end_times.end() ? std::max(now_, end->second) : now_ + remaining / rate, 0, i,
                    s.version});
    }
    if (learn_ && new_observations_ >= options_.refit_every) {
      model_.refit();
      new_observations_ = 0;
    }
  }

  // Whether a GPU of the nodes `r` runs on, other than its own, runs a job.
  bool node_busy_beside(const RunningJob& r) const {
    const int per_node = cluster_.spec().gpus_per_node;
    for (int g : r.gpus) {
      const int first = cluster_.node_of(g) * per_node;
      for (int h = first; h < first + per_node; ++h)
        if (!cluster_.is_free(h) && std::find(r.gpus.begin(), r.gpus.end(), h) == r.gpus.end()) return true;
    }
    return false;
  }

  // Where the ground truth takes each member's slowdown in the group of jobs on one GPU; by
  // interference type here (slot 0: untyped), by type name in summarise().
  void count_group(const std::vector<JobId>& on) {
    for (JobId id : on) {
      const Job& job = jobs_[index_[id]];
      group_.clear();
      for (JobId other : on)
        if (other != id) group_.push_back(&jobs_[index_[other]]);
      const std::size_t slot = static_cast<std::size_t>(std::max(job.type, -1) + 1);
      if (slot >= truth_use_.size()) truth_use_.resize(slot + 1, {nullptr, {}});
      auto& [name, use] = truth_use_[slot];
      if (name == nullptr) name = &job.profile.type;
      ++(truth_.source(job, group_) == SlowdownTruth::kFormula ? use.formula_groups : use.pair_data_groups);
    }
  }

  void observe_pair(JobId a, JobId b) {
    const Job& ja = jobs_[index_[a]];
    const Job& jb = jobs_[index_[b]];
    if (ja.type < 0 || jb.type < 0 || ja.gpus > 1 || jb.gpus > 1) return;
    for (const auto& [x, y] : {std::pair{&ja, &jb}, std::pair{&jb, &ja}}) {
      int& count = observed_[{x->type, y->type}];
      if (count >= options_.observations_per_pair) continue;
      ++count;
      model_.observe(x->type, y->type, truth_.pair(*x, *y));
      ++new_observations_;
      ++result_.online_observations;
    }
  }

  void summarise() {
    result_.policy = std::string(policy_.name());
    for (const auto& [name, use] : truth_use_) {
      if (name == nullptr) continue;
      GroundTruthUse& sum = result_.ground_truth[*name];
      sum.pair_data_groups += use.pair_data_groups;
      sum.formula_groups += use.formula_groups;
    }
    result_.jobs = jobs_.size();
    std::vector<double> jct, ftf;
    jct.reserve(jobs_.size());
    ftf.reserve(jobs_.size());
    result_.outcomes.reserve(jobs_.size());
    double queue_sum = 0, last_finish = 0;
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      const Job& j = jobs_[i];
      JobOutcome o;
      o.id = j.id;
      o.arrival_s = j.arrival_s;
      o.first_start_s = j.first_start_s;
      o.finish_s = state_[i].finished ? finish_time_[i] : -1;
      o.work_s = j.work_s;
      o.queued_s = queued_[i];
      o.delivered_s = delivered_[i];
      o.preemptions = j.preemptions;
      o.gpus = j.gpus;
      o.spread = spread_[i];
      o.colocated = colocated_[i];
      result_.colocated_jobs += o.colocated;
      result_.spread_jobs += o.spread;
      if (o.finish_s >= 0) {
        jct.push_back(o.finish_s - o.arrival_s);
        ftf.push_back((o.finish_s - o.arrival_s) / j.work_s);
        queue_sum += o.queued_s;
        last_finish = std::max(last_finish, o.finish_s);
      }
      result_.outcomes.push_back(o);
    }
    RECMIX_REQUIRE(jct.size() == jobs_.size(), Error,
                   "simulation stalled: " + std::to_string(jobs_.size() - jct.size()) + " of " +
                       std::to_string(jobs_.size()) + " jobs never finished under policy " + result_.policy);
    const double first_arrival = jobs_.empty() ? 0 : jobs_.front().arrival_s;
    result_.makespan_s = last_finish - first_arrival;
    auto percentile = [](std::vector<double> v, double q) {
      std::sort(v.begin(), v.end());
      const std::size_t k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
      return v[std::min(k, v.size() - 1)];
    };
    double sum = 0;
    for (double v : jct) sum += v;
    result_.avg_jct_s = sum / static_cast<double>(jct.size());
    result_.median_jct_s = percentile(jct, 0.5);
    result_.p99_jct_s = percentile(jct, 0.99);
    result_.avg_queue_s = queue_sum / static_cast<double>(jct.size());
    double fsum = 0;
    for (double v : ftf) fsum += v;
    result_.ftf_avg = fsum / static_cast<double>(ftf.size());
    result_.ftf_p99 = percentile(ftf, 0.99);
    const double span = std::max(now_ - first_arrival, 1e-9);
    result_.avg_gpu_util = busy_integral_ / (span * cluster_.gpu_count());
    result_.avg_effective_util = effective_integral_ / (span * cluster_.gpu_count());
    result_.throughput_jobs_per_h = static_cast<double>(jct.size()) / (result_.makespan_s / 3600.0);
  }

  ClusterState cluster_;
  std::vector<Job> jobs_;
  Policy& policy_;
  const SlowdownTruth& truth_;
  InterferenceModel model_;
  SimOptions options_;
  std::vector<RunState> state_;
  std::vector<double> queued_ = std::vector<double>(state_.size(), 0.0);
  std::vector<double> delivered_ = std::vector<double>(state_.size(), 0.0);
  std::vector<double> finish_time_ = std::vector<double>(state_.size(), -1.0);
  std::vector<char> spread_ = std::vector<char>(state_.size(), 0);
  std::vector<char> colocated_ = std::vector<char>(state_.size(), 0);
  std::unordered_map<JobId, std::size_t> index_;
  std::vector<Job*> queue_;    // waiting jobs by (arrival, id): queue_[queue_head_ ..]
  std::size_t queue_head_ = 0;
  std::vector<std::size_t> preempted_;
  std::vector<int> dirty_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::set<double> pending_wakes_;
  std::map<std::pair<int, int>, int> observed_;
  std::vector<const Job*> group_;  // count_group's co-runners
  std::vector<std::pair<const std::string*, GroundTruthUse>> truth_use_;  // by type + 1
  int new_observations_ = 0;
  std::size_t started_this_round_ = 0;
  bool learn_ = false;
  double now_ = 0;
  double interval_ = 60;
  double next_sample_ = 0;
  double busy_integral_ = 0, effective_integral_ = 0, effective_sum_ = 0;
  std::size_t finished_ = 0;
  std::size_t last_progress_ = 0;
  SimResult result_;
};

}  // namespace

SimResult simulate(const ClusterSpec& cluster, std::vector<Job> jobs, Policy& policy, const SlowdownTruth& truth,
                   InterferenceModel model, const SimOptions& options) {
  RECMIX_REQUIRE(!jobs.empty(), ConfigError, "simulate: no jobs");
  Simulation sim(cluster, std::move(jobs), policy, truth, std::move(model), options);
  return sim.run();
}

}  // namespace recmix::sched
