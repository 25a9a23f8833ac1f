#include "report/training_run.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>

#include "core/error.hpp"

namespace recmix::report {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kReasonsShown = 3;

// "ckpt-000000120.h5" -> 120; -1 for any other name.
std::int64_t checkpoint_step(const std::string& name) {
  if (name.size() < 9 || name.rfind("ckpt-", 0) != 0 || name.substr(name.size() - 3) != ".h5") return -1;
  const std::string digits = name.substr(5, name.size() - 8);
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

// Training time at `step`, linear between the train records around it (the first record at or
// past it and the one before). Records before `limit` only; sorted by step where `sorted`.
double time_at_step(const std::vector<TrainRecord>& train, std::size_t limit, std::int64_t step, bool sorted) {
  limit = std::min(limit, train.size());
  if (limit == 0) return kNaN;
  std::size_t next = limit;
  if (sorted) {
    next = static_cast<std::size_t>(std::lower_bound(train.begin(), train.begin() + static_cast<std::ptrdiff_t>(limit), step,
                                                     [](const TrainRecord& r, std::int64_t s) { return r.step < s; }) -
                                    train.begin());
  } else {
    for (std::size_t i = 0; i < limit; ++i)
      if (train[i].step >= step) {
        next = i;
        break;
      }
  }
  if (next == limit) return train[limit - 1].time_s;
  if (next == 0 || train[next].step == step) return train[next].time_s;
  const TrainRecord& a = train[next - 1];
  const TrainRecord& b = train[next];
  if (b.step <= a.step || b.time_s < a.time_s) return b.time_s;
  return a.time_s + (b.time_s - a.time_s) * static_cast<double>(step - a.step) / static_cast<double>(b.step - a.step);
}

// "a  b  c" columns separated by two spaces or more (a column may hold one space: "1.5 KiB").
std::vector<std::string> split_columns(const std::string& line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size()) break;
    std::size_t end = i;
    while (end < line.size() && !(line[end] == ' ' && (end + 1 >= line.size() || line[end + 1] == ' '))) ++end;
    out.push_back(line.substr(i, end - i));
    i = end;
  }
  return out;
}

}  // namespace

namespace {

// One metrics.jsonl line read through nlohmann's SAX interface: the top-level fields the report
// uses, without building a DOM object per line (10^6 lines: 2.4 s for the whole report, 3.0 s with one).
class MetricsRecord : public nlohmann::json_sax<nlohmann::json> {
 public:
  enum Field { step, epoch, loss, samples_per_s, elapsed_s, device_peak_bytes, auc, logloss, samples, fields };
  struct Value {
    bool present = false, integer = false;
    double number = kNaN;  // NaN for null
    std::int64_t whole = 0;
  };
  bool object = false, has_type = false;
  std::string type;
  Value values[fields];
  std::size_t error_byte = 0;

  bool null() override { return set(kNaN, false, 0); }
  bool boolean(bool) override { return skip(); }
  bool number_integer(number_integer_t v) override { return set(static_cast<double>(v), true, v); }
  bool number_unsigned(number_unsigned_t v) override {
    return set(static_cast<double>(v), v <= static_cast<number_unsigned_t>(INT64_MAX), static_cast<std::int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return set(v, false, 0); }
  bool string(string_t& v) override {
    if (depth_ == 1 && key_ == "type") {
      type = v;
      has_type = true;
    }
    return skip();
  }
  bool binary(binary_t&) override { return skip(); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) object = true;
    ++depth_;
    return true;
  }
  bool end_object() override { return end(); }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override { return end(); }
  bool key(string_t& k) override {
    if (depth_ == 1) key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    error_byte = position;
    return false;
  }

 private:
  bool end() {
    --depth_;
    return true;
  }
  bool skip() { return true; }
  bool set(double v, bool integer, std::int64_t whole) {
    if (depth_ != 1) return true;
    static const char* const kNames[fields] = {"step", "epoch", "loss", "samples_per_s", "elapsed_s",
                                               "device_peak_bytes", "auc", "logloss", "samples"};
    for (int f = 0; f < fields; ++f)
      if (key_ == kNames[f]) values[f] = {true, integer, v, whole};
    return true;
  }
  int depth_ = 0;
  std::string key_;
};

}  // namespace

bool parse_metrics_line(const std::string& line, TrainingRun& run, std::string& reason) {
  MetricsRecord j;
  if (!nlohmann::json::sax_parse(line, &j)) {
    reason = fmt::format("not JSON (byte {}{})", j.error_byte,
                         j.error_byte >= line.size() ? ", the line ends early: truncated?" : "");
    return false;
  }
  if (!j.object || !j.has_type) {
    reason = "not a metrics record (no \"type\")";
    return false;
  }
  using F = MetricsRecord;
  const auto integer = [&](F::Field f) { return j.values[f].present && j.values[f].integer; };
  if (j.type == "train") {
    if (!integer(F::step) || !j.values[F::loss].present) {
      reason = "a train record without \"step\" or \"loss\"";
      return false;
    }
    TrainRecord r;
    r.step = j.values[F::step].whole;
    r.epoch = integer(F::epoch) ? j.values[F::epoch].whole : 0;
    r.loss = j.values[F::loss].number;
    r.samples_per_s = j.values[F::samples_per_s].number;
    r.elapsed_s = j.values[F::elapsed_s].number;
    r.device_peak_bytes = j.values[F::device_peak_bytes].number;
    // elapsed_s restarts at 0 when training resumes: the time goes on from the last record.
    double offset = 0;
    if (!run.train.empty()) {
      const TrainRecord& last = run.train.back();
      offset = last.time_s - last.elapsed_s;
      if (std::isfinite(r.elapsed_s) && std::isfinite(last.elapsed_s) && r.elapsed_s < last.elapsed_s)
        offset = last.time_s;
      if (!std::isfinite(offset)) offset = 0;
    }
    r.time_s = offset + r.elapsed_s;
    run.train.push_back(r);
    return true;
  }
  if (j.type == "eval") {
    if (!integer(F::step)) {
      reason = "an eval record without \"step\"";
      return false;
    }
    EvalRecord e;
    e.step = j.values[F::step].whole;
    e.auc = j.values[F::auc].number;
    e.logloss = j.values[F::logloss].number;
    e.samples = integer(F::samples) ? j.values[F::samples].whole : 0;
    // time_s is filled in once every record is read: here, the index of the next train record
    e.time_s = static_cast<double>(run.train.size());
    run.eval.push_back(e);
    return true;
  }
  ++run.other_records;
  return true;
}

void parse_train_log(std::istream& log, TrainingRun& run, std::vector<std::pair<std::int64_t, std::string>>& written) {
  std::string line;
  bool in_plan = false, plan_header_seen = false;
  while (std::getline(log, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (in_plan) {
      // The plan's lines follow the "sharding plan:" message, without a time stamp of their own.
      if (line.rfind("sharding plan: ", 0) == 0) {
        run.plan_title = line;
        continue;
      }
      const auto cols = split_columns(line);
      if (!plan_header_seen && !cols.empty() && cols[0] == "rank") {
        plan_header_seen = true;
        continue;
      }
      if (plan_header_seen && cols.size() >= 3 && std::all_of(cols[0].begin(), cols[0].end(), ::isdigit)) {
        run.plan.push_back({cols[0], cols[1], cols[2], cols.size() > 3 ? cols[3] : "-"});
        continue;
      }
      in_plan = false;
    }
    if (line.find(" sharding plan:") != std::string::npos && line.size() >= 15 &&
        line.compare(line.size() - 14, 14, "sharding plan:") == 0) {
      in_plan = true;
      plan_header_seen = false;
      run.plan.clear();
      run.plan_title.clear();
      ++run.plans_in_log;
      continue;
    }
    if (auto at = line.find(" job '"); at != std::string::npos && line.find(" rank(s), ") != std::string::npos) {
      run.job_line = line.substr(at + 1);
      continue;
    }
    if (auto at = line.find("checkpoint written: "); at != std::string::npos) {
      const std::string path = line.substr(at + 20);
      const std::string name = fs::path(path).filename().string();
      const std::int64_t step = checkpoint_step(name);
      if (step >= 0) written.emplace_back(step, name);
    }
  }
}

std::pair<double, double> checkpoint_time_and_loss(const std::vector<TrainRecord>& train, std::int64_t step) {
  // Launches: a resume (elapsed_s restarts) or a restart from an earlier step begins one. The
  // file at `step` is the one the last launch starting at or before it wrote; a launch resumed
  // from that very checkpoint logs its first record past it.
  std::size_t begin = train.size(), end = train.size();
  for (std::size_t first = 0; first < train.size();) {
    std::size_t last = first + 1;
    while (last < train.size() && train[last].step >= train[last - 1].step &&
           !(train[last].elapsed_s < train[last - 1].elapsed_s))
      ++last;
    if (train[first].step <= step) {
      begin = first;
      end = last;
    }
    first = last;
  }
  if (begin == train.size()) return {kNaN, kNaN};
  // Within the launch: the record at the step, else linear between those around it; a launch
  // stopped between two records (its checkpoint at the stop) ends at its last record.
  std::size_t next = begin;
  while (next < end && train[next].step < step) ++next;
  if (next == end) return {train[end - 1].time_s, train[end - 1].loss};
  const TrainRecord& b = train[next];
  if (b.step == step || next == begin) return {b.time_s, b.loss};
  const TrainRecord& a = train[next - 1];
  const double share = static_cast<double>(step - a.step) / static_cast<double>(b.step - a.step);
  return {a.time_s + (b.time_s - a.time_s) * share, a.loss};
}

bool is_training_run(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "metrics.jsonl", ec) || fs::is_regular_file(fs::path(dir) / "train.log", ec);
}

TrainingRun read_training_run(const std::string& dir, const std::string& name) {
  TrainingRun run;
  run.name = name;
  run.dir = dir;
  const fs::path metrics = fs::path(dir) / "metrics.jsonl", log_path = fs::path(dir) / "train.log";
  if (!is_training_run(dir))
    throw IoError(fmt::format("{}: not a training run directory (no metrics.jsonl or train.log)", dir));

  if (fs::is_regular_file(metrics)) {
    std::ifstream in(metrics);
    if (!in) throw IoError(fmt::format("{}: cannot read", metrics.string()));
    std::string line, reason;
    std::vector<std::string> reasons;
    while (std::getline(in, line)) {
      ++run.metrics_lines;
      if (line.empty() || line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (!parse_metrics_line(line, run, reason)) {
        ++run.skipped_lines;
        if (reasons.size() < kReasonsShown) reasons.push_back(fmt::format("line {}: {}", run.metrics_lines, reason));
      }
    }
    if (in.bad()) throw IoError(fmt::format("{}: read error after line {}", metrics.string(), run.metrics_lines));
    if (run.skipped_lines > 0) {
      std::string list;
      for (const auto& r : reasons) list += (list.empty() ? "" : "; ") + r;
      run.notes.push_back(fmt::format("{}: skipped {} of {} lines ({}{})", metrics.string(), run.skipped_lines,
                                      run.metrics_lines, list, run.skipped_lines > kReasonsShown ? "; ..." : ""));
    }
    if (run.other_records > 0)
      run.notes.push_back(fmt::format("{}: {} records of types other than train and eval were not drawn",
                                      metrics.string(), run.other_records));
    if (run.train.empty() && run.eval.empty())
      run.notes.push_back(fmt::format("{}: no train or eval records", metrics.string()));
  } else {
    run.notes.push_back(fmt::format("{}: absent; no curves", metrics.string()));
  }

  bool sorted = true;
  for (std::size_t i = 1; i < run.train.size() && sorted; ++i) sorted = run.train[i - 1].step <= run.train[i].step;
  for (EvalRecord& e : run.eval) {
    // An evaluation follows its step: the train record logged at or after that step bounds it.
    const auto next = static_cast<std::size_t>(e.time_s);
    e.time_s = time_at_step(run.train, std::min(run.train.size(), next + 1), e.step, sorted);
  }

  std::vector<std::pair<std::int64_t, std::string>> written;
  if (fs::is_regular_file(log_path)) {
    std::ifstream in(log_path);
    if (!in) throw IoError(fmt::format("{}: cannot read", log_path.string()));
    parse_train_log(in, run, written);
    if (run.plans_in_log == 0)
      run.notes.push_back(fmt::format("{}: holds no sharding plan; the plan table is skipped", log_path.string()));
  } else {
    run.notes.push_back(fmt::format("{}: absent; no sharding plan, and only the checkpoints on disk are shown",
                                    log_path.string()));
  }

  // Checkpoints: those train.log names (some since pruned) and those on disk.
  const fs::path ckpt_dir = fs::path(dir) / "checkpoints";
  std::vector<CheckpointRecord> found;
  std::error_code ec;
  if (fs::is_directory(ckpt_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(ckpt_dir, ec)) {
      const std::string file = entry.path().filename().string();
      const std::int64_t step = checkpoint_step(file);
      if (step < 0 || !entry.is_regular_file(ec)) continue;
      CheckpointRecord c;
      c.step = step;
      c.file = file;
      c.present = true;
      c.bytes = entry.file_size(ec);
      found.push_back(c);
    }
  }
  for (const auto& entry : written) {
    const std::string& name = entry.second;  // clang 14 cannot capture a structured binding
    const bool known = std::any_of(found.begin(), found.end(), [&](const CheckpointRecord& c) { return c.file == name; });
    if (known) continue;
    CheckpointRecord c;
    c.step = entry.first;
    c.file = name;
    found.push_back(c);
  }
  std::sort(found.begin(), found.end(), [](const CheckpointRecord& a, const CheckpointRecord& b) { return a.step < b.step; });
  for (CheckpointRecord& c : found) std::tie(c.time_s, c.loss) = checkpoint_time_and_loss(run.train, c.step);
  run.checkpoints = std::move(found);
  return run;
}

}  // namespace recmix::report
