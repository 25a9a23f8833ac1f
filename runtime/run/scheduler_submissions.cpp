// SchedulerService: the jobs that come in (the jobs file, a previous run to resume, recmix
// submit's spool), each checked and estimated before it is queued.
#include "runtime/run/scheduler_service.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.hpp"
#include "core/half.hpp"
#include "data/format.hpp"
#include "device/memory_pool.hpp"
#include "sched/dlrm_profile.hpp"
#include "sched/machine_model.hpp"
#include "sched/memory_estimator.hpp"
#include "runtime/run/messages.hpp"
#include "runtime/run/scheduler_record.hpp"
#include "runtime/train/job_spec_sched.hpp"

namespace recmix::runtime::run {
namespace fs = std::filesystem;
namespace {

// A spool entry over this size is rejected unread.
constexpr off_t kMaxEntryBytes = off_t{1} << 20;
// The longest `origin` or `base_dir` a spool entry may carry.
constexpr std::size_t kMaxFieldBytes = 4096;

// The text of a spool entry, read only when it is what recmix submit writes: a regular file (not a
// symlink, FIFO or device: O_NOFOLLOW, and O_NONBLOCK so that a FIFO cannot hang the round) owned
// by the run's user and at most kMaxEntryBytes. The error names the entry and the rule, never its
// bytes.
std::string read_entry(const fs::path& f) {
  const std::string name = f.filename().string();
  const int fd = ::open(f.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw IoError(fmt::format("spool entry '{}' cannot be opened as a plain file (a symlink is refused): {}", name,
                              std::strerror(errno)));
  struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw IoError(fmt::format("spool entry '{}': {}", name, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw ConfigError(fmt::format("spool entry '{}' is not a regular file", name));
  if (st.st_uid != ::geteuid())
    throw ConfigError(fmt::format("spool entry '{}' is owned by uid {}, not by the run's user (uid {})", name,
                                  st.st_uid, ::geteuid()));
  if (st.st_size > kMaxEntryBytes)
    throw ConfigError(fmt::format("spool entry '{}' is {} bytes, over the limit of {} bytes", name, st.st_size,
                                  kMaxEntryBytes));
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

// Why the spool at `spool` (in `run_dir`) cannot be trusted, or "" when it can: both are real
// directories (not symlinks) of the run's user, the spool 0700 and the run directory writable by
// no one else, so that no other user can put a job in it or swap it for one of theirs.
std::string spool_distrust(const fs::path& run_dir, const fs::path& spool) {
  struct stat st{};
  if (::lstat(run_dir.c_str(), &st) != 0) return fmt::format("the run directory is gone ({})", std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return "the run directory is not a directory (a symlink?)";
  if (st.st_uid != ::geteuid()) return fmt::format("the run directory is owned by uid {}, not the run's", st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fmt::format("the run directory's mode is {:o}: others may write in it", st.st_mode & 07777);
  if (::lstat(spool.c_str(), &st) != 0) return fmt::format("spool/ is gone ({})", std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return "spool/ is not a directory (a symlink?)";
  if (st.st_uid != ::geteuid()) return fmt::format("spool/ is owned by uid {}, not the run's", st.st_uid);
  if ((st.st_mode & 077) != 0) return fmt::format("spool/'s mode is {:o}, not 700", st.st_mode & 07777);
  return {};
}

// mkdir with an owner-only mode, so that no umask ever leaves it open; an existing one is kept.
void make_private_directory(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw IoError(fmt::format("cannot make '{}': {}", dir.string(), std::strerror(errno)));
}

}  // namespace

// The run directory 0750 (the job specs in checkpoints are not for everyone) and its spool 0700,
// created so at once, not opened by the umask first. A spool that another user owns, or that is
// a symlink, is refused before the run starts.
void SchedulerService::make_run_directory() const {
  const fs::path dir = options_.run_dir, spool = dir / "spool";
  if (!dir.parent_path().empty()) fs::create_directories(dir.parent_path());
  make_private_directory(dir);
  struct stat st{};
  if (::lstat(dir.c_str(), &st) == 0 && st.st_uid == ::geteuid() && S_ISDIR(st.st_mode))
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec, fs::perm_options::replace);
  make_private_directory(spool);
  if (::lstat(spool.c_str(), &st) == 0 && st.st_uid == ::geteuid() && S_ISDIR(st.st_mode))
    fs::permissions(spool, fs::perms::owner_all, fs::perm_options::replace);
  if (const std::string why = spool_distrust(dir, spool); !why.empty())
    throw ConfigError(fmt::format("run directory '{}': {}; recmix run will not take jobs from it", dir.string(), why));
  make_private_directory(dir / "jobs");
}

void SchedulerService::add_job(RunJob job, const std::string& source) {
  auto rec = std::make_unique<Record>();
  Record& r = *rec;
  r.job = std::move(job);
  if (!options_.device_kind.empty()) r.job.spec.device.kind = parse_choice<device::BackendKind>(options_.device_kind, "--device");
  r.job.spec.run_dir = (fs::path(options_.run_dir) / "jobs" / r.job.spec.name).string();
  r.job.spec.checkpoint.dir = (fs::path(r.job.spec.run_dir) / "checkpoints").string();
  r.sjob.id = static_cast<sched::JobId>(records_.size());
  r.sjob.name = r.job.spec.name;
  r.sjob.gpus = r.job.ranks;
  r.sjob.arrival_s = std::max(r.job.arrival_s, source == "spool" ? clock() : 0.0);
  r.sjob.priority = r.job.priority;
  by_name_.try_emplace(rec->job.spec.name, rec.get());
  records_.push_back(std::move(rec));
  next_arrival_ = 0;  // a new job: look for arrivals again
  const double capacity = cluster_->spec().gpu_memory_bytes;
  if (options_.resume && r.job.ranks > plane_.size()) {
    // Continuing on fewer ranks than the job had: it resumes on all of them (checkpoints hold the
    // logical tables, so N ranks' state loads on M; the results agree up to rounding).
    event({{"event", "ranks_changed"}, {"job", r.job.spec.name}, {"from", r.job.ranks}, {"to", plane_.size()}});
    if (!options_.quiet)
      std::fprintf(stderr, "[%7.1fs] '%s' asked for %d ranks; the resumed run has %d: it continues on %d\n", now(),
                   r.job.spec.name.c_str(), r.job.ranks, plane_.size(), plane_.size());
    r.job.ranks = plane_.size();
    r.sjob.gpus = plane_.size();
  }
  try {
    check_run_job(r.job, plane_.size());
    if (r.job.spec.device.threads > options_.cores_per_rank)
      throw ConfigError(fmt::format("job '{}' asks for {} threads per rank; ranks have {} cores",
                                    r.job.spec.name, r.job.spec.device.threads, options_.cores_per_rank));
    const auto info = data::open_dataset_info(r.job.spec.data.train);
    const auto sspec = to_sched_spec(r.job.spec, info, r.job.ranks, r.job.priority, r.job.arrival_s);
    sched::JobProfile profile = sched::dlrm_profile(sspec, sched::machine_model(options_.machine));
    // The machine model is the whole CPU; a job with fewer threads than the rank's cores uses
    // that share of its compute.
    const double core_share = std::min(1.0, double(r.job.spec.device.threads) / options_.cores_per_rank);
    profile.util[sched::Resource::compute] *= core_share;
    r.sjob.profile = profile;
    r.sjob.work_s = profile.solo_step_s * static_cast<double>(sspec.steps);
    r.sjob.type = model_.type_index(r.job.spec.name);
    r.sjob.cores = r.job.spec.device.threads;
    model_.set_utilisation(r.sjob.type, profile.util);
    r.estimate = profile.peak_memory_bytes;
    r.share = std::min(capacity, std::ceil(r.estimate * options_.jobs.scheduler.memory_headroom));
    r.total_steps = sspec.steps;
    if (r.estimate > capacity)
      throw ConfigError(fmt::format("job '{}' can never fit: its peak memory estimate {} is above every rank's capacity {}",
                                    r.job.spec.name, device::format_bytes(static_cast<std::size_t>(r.estimate)),
                                    device::format_bytes(static_cast<std::size_t>(capacity))));
  } catch (const Error& e) {
    r.state = "rejected";
    r.error = e.what();
    event({{"event", "rejected"}, {"id", r.sjob.id}, {"job", r.job.spec.name}, {"source", source}, {"reason", r.error}});
    if (!options_.quiet) std::fprintf(stderr, "[%7.1fs] rejected '%s': %s\n", now(), r.job.spec.name.c_str(), e.what());
    return;
  }
  if (auto prev = previous_.find(r.job.spec.name); prev != previous_.end()) {
    const auto& j = prev->second;
    const std::string state = j.value("state", std::string());
    if (terminal(state)) {  // ended in the interrupted run: reported, not run again
      r.state = state;
      r.step = j.value("steps", std::int64_t{0});
      r.loss = j.value("loss", 0.0);
      if (j.contains("error")) r.error = j["error"].get<std::string>();
      if (j.contains("eval")) r.eval = j["eval"];
      event({{"event", "resumed_ended"}, {"job", r.job.spec.name}, {"state", state}});
      return;
    }
  }
  if (options_.resume && fs::exists(r.job.spec.checkpoint.dir) && !fs::is_empty(r.job.spec.checkpoint.dir)) {
    r.resume = true;
    r.sjob.arrival_s = 0;  // it had arrived in the interrupted run
  }
  event({{"event", "submitted"}, {"id", r.sjob.id}, {"job", r.job.spec.name}, {"source", source}, {"origin", r.job.origin},
         {"resume", r.resume},
         {"ranks", r.job.ranks}, {"threads", r.job.spec.device.threads}, {"arrival_s", r.sjob.arrival_s},
         {"priority", r.job.priority}, {"estimate_bytes", r.estimate}, {"steps", r.total_steps},
         {"profile", {{"type", r.sjob.profile.type}, {"solo_step_s", r.sjob.profile.solo_step_s},
                      {"util", r.sjob.profile.util.share}}}});
}

void SchedulerService::load_previous_run() {
  const fs::path summary = fs::path(options_.run_dir) / "summary.json";
  if (fs::exists(summary)) {
    std::ifstream in(summary);
    const auto s = nlohmann::json::parse(in);
    for (const auto& j : s.at("jobs")) previous_[j.at("name").get<std::string>()] = j;
  }
  // Jobs submitted to the interrupted run come back, in the order they were accepted.
  const fs::path accepted = fs::path(options_.run_dir) / "spool" / "accepted";
  if (!fs::exists(accepted)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(accepted))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    const auto j = nlohmann::json::parse(in);
    options_.jobs.jobs.push_back(parse_run_job(j.at("spec_text").get<std::string>(), j.at("origin").get<std::string>(),
                                               j.at("base_dir").get<std::string>()));
  }
}

// Every round: the spool is checked first (spool_distrust); when its owner or mode changed the
// run stops reading it for good, says so once, and runs on with the jobs it has.
void SchedulerService::take_spool() {
  const fs::path spool = fs::path(options_.run_dir) / "spool";
  if (!spool_refused_.empty()) return;
  if (std::string why = spool_distrust(options_.run_dir, spool); !why.empty()) {
    spool_refused_ = std::move(why);
    event({{"event", "spool_refused"}, {"level", "error"}, {"reason", spool_refused_}});
    std::fprintf(stderr, "[%7.1fs] error: %s; the run takes no more jobs (nor recmix close) from its spool\n", now(),
                 spool_refused_.c_str());
    return;
  }
  if (!close_requested_ && fs::exists(spool / "close")) {  // recmix close
    close_requested_ = true;
    event({{"event", "close_requested"}});
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(spool))  // symlinks and FIFOs too: they are rejected, not skipped
    if (e.symlink_status().type() != fs::file_type::directory && e.path().extension() == ".json")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string verdict = "accepted", reason;
    try {
      const std::string text = read_entry(f);
      const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object())
        throw ConfigError(fmt::format("spool entry '{}' is not a JSON object", f.filename().string()));
      for (const char* key : {"origin", "base_dir"})  // short fields: events.jsonl records them
        if (j.contains(key) && j[key].is_string() && j[key].get_ref<const std::string&>().size() > kMaxFieldBytes)
          throw ConfigError(fmt::format("spool entry '{}': field '{}' is longer than {} bytes", f.filename().string(),
                                        key, kMaxFieldBytes));
      RunJob job = parse_run_job(j.at("spec_text").get<std::string>(), j.at("origin").get<std::string>(),
                                 j.at("base_dir").get<std::string>());
      for (const auto& r : records_)
        if (r->job.spec.name == job.spec.name)
          throw ConfigError(fmt::format("a job named '{}' exists already in this run", job.spec.name));
      add_job(std::move(job), "spool");
      if (records_.back()->state == "rejected") {
        verdict = "rejected";
        reason = records_.back()->error;
      }
    } catch (const std::exception& e) {
      verdict = "rejected";
      reason = e.what();
      event({{"event", "rejected"}, {"file", f.filename().string()}, {"source", "spool"}, {"reason", reason}});
      spool_rejections_.push_back({{"file", f.filename().string()}, {"reason", reason}});
    }
    const fs::path dir = spool / verdict;
    fs::create_directories(dir);
    fs::rename(f, dir / f.filename());
    if (!reason.empty()) std::ofstream(dir / (f.filename().string() + ".reason")) << reason << '\n';
    changed_ = true;
  }
}

}  // namespace recmix::runtime::run
