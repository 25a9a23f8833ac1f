// The quality target (train.target_auc), evaluations a fraction of an epoch apart
// (train.eval_per_epoch), and the MLPerf log (train.mllog), checked against the format of
// mlperf_logging.mllog and the DLRM-DCNv2 compliance rules (mlcommons/logging,
// compliance_checker/training_5.0.0: common.yaml, closed_common.yaml, closed_dlrm_dcnv2.yaml).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/error.hpp"
#include "runtime/train/mllog.hpp"
#include "trainer_test_support.hpp"

using namespace recmix;
using namespace recmix::runtime;
using namespace recmix::runtime::testing_support;
using nlohmann::json;

namespace {

int registered = register_world();

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::vector<json> records(const std::string& run_dir, const std::string& type) {
  std::vector<json> out;
  for (auto& r : read_jsonl(run_dir + "/metrics.jsonl"))
    if (r.value("type", "") == type) out.push_back(r);
  return out;
}

// Every line of an MLPerf log: the library's line format and field types, the keys the rules
// require, their order and pairing; returns the events.
std::vector<json> check_mllog(const std::string& path, const std::string& status) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  const std::regex line_re(R"(^:::MLLOG \{.*\}$)");
  std::vector<json> ev;
  for (std::string line; std::getline(in, line);) {
    EXPECT_TRUE(std::regex_match(line, line_re)) << line;
    json j = json::parse(line.substr(9));
    // The fields, in the library's order, with their types.
    EXPECT_EQ(j.size(), 6u) << line;
    const auto at = [&](const char* f) { return line.find(std::string("\"") + f + "\":"); };
    EXPECT_TRUE(at("namespace") < at("time_ms") && at("time_ms") < at("event_type") && at("event_type") < at("key") &&
                at("key") < at("value") && at("value") < at("metadata"))
        << line;
    EXPECT_EQ(j["namespace"], "") << line;
    EXPECT_TRUE(j["time_ms"].is_number_integer()) << line;
    EXPECT_TRUE(std::set<std::string>({"POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"}).count(j["event_type"]))
        << line;
    EXPECT_TRUE(j["key"].is_string()) << line;
    EXPECT_TRUE(j.contains("value")) << line;
    EXPECT_TRUE(j["value"].is_null() || j["value"].is_string() || j["value"].is_number_float()) << line;
    EXPECT_TRUE(j["metadata"].is_object() && j["metadata"]["file"].is_string() &&
                j["metadata"]["lineno"].is_number_integer())
        << line;
    const std::string key = j["key"];
    if (key.ends_with("_start")) { EXPECT_EQ(j["event_type"], "INTERVAL_START") << line; }
    if (key.ends_with("_stop")) { EXPECT_EQ(j["event_type"], "INTERVAL_END") << line; }
    if (!ev.empty()) { EXPECT_GE(j["time_ms"].get<std::int64_t>(), ev.back()["time_ms"].get<std::int64_t>()) << line; }
    ev.push_back(j);
  }
  std::map<std::string, std::vector<std::size_t>> where;
  for (std::size_t i = 0; i < ev.size(); ++i) where[ev[i]["key"]].push_back(i);
  const auto count = [&](const std::string& k) { return where.count(k) ? where[k].size() : 0; };
  for (const char* k : {"submission_benchmark", "submission_division", "submission_org", "submission_platform",
                        "submission_status", "init_stop", "run_start", "run_stop", "global_batch_size",
                        "gradient_accumulation_steps", "seed", "opt_name", "opt_base_learning_rate",
                        "opt_weight_decay", "opt_learning_rate_warmup_steps", "opt_learning_rate_decay_start_step",
                        "opt_learning_rate_decay_steps", "train_samples", "eval_samples"})
    EXPECT_EQ(count(k), 1u) << k;
  for (const char* k : {"cache_clear", "init_start", "epoch_start", "epoch_stop", "eval_start", "eval_stop",
                        "eval_accuracy"})
    EXPECT_GE(count(k), 1u) << k;
  if (testing::Test::HasFailure()) return ev;
  const auto first = [&](const char* k) { return where[k].front(); };
  EXPECT_LT(first("init_start"), first("init_stop"));
  EXPECT_LT(first("init_stop"), first("run_start"));
  EXPECT_LT(first("run_start"), first("eval_accuracy"));
  EXPECT_LT(where["eval_accuracy"].back(), first("run_stop"));
  EXPECT_LT(first("run_start"), first("epoch_start"));
  // Every interval closes, none nests in itself.
  for (const char* base : {"init", "run", "epoch", "eval"}) {
    int open = 0;
    for (auto& e : ev) {
      const std::string k = e["key"];
      if (k == std::string(base) + "_start") { EXPECT_EQ(open++, 0) << base; }
      if (k == std::string(base) + "_stop") { EXPECT_EQ(open--, 1) << base; }
    }
    EXPECT_EQ(open, 0) << base;
  }
  for (std::size_t i : where["eval_accuracy"]) {
    EXPECT_TRUE(ev[i]["metadata"]["epoch_num"].is_number()) << ev[i];
    EXPECT_TRUE(ev[i]["value"].get<double>() >= 0 && ev[i]["value"].get<double>() <= 1) << ev[i];
  }
  for (const char* k : {"epoch_start", "epoch_stop", "eval_start", "eval_stop"})
    for (std::size_t i : where[k]) EXPECT_TRUE(ev[i]["metadata"].contains("epoch_num")) << ev[i];
  const json& stop = ev[first("run_stop")];
  EXPECT_EQ(stop["metadata"]["status"], status);
  EXPECT_EQ(ev[first("submission_benchmark")]["value"], "dlrm_dcnv2");
  EXPECT_TRUE(ev[first("submission_division")]["value"] == "closed" || ev[first("submission_division")]["value"] == "open");
  EXPECT_GT(ev[first("gradient_accumulation_steps")]["value"].get<double>(), 0);
  if (ev[first("opt_name")]["value"] == "adagrad") {
    for (const char* k : {"opt_adagrad_learning_rate_decay", "opt_adagrad_initial_accumulator_value",
                          "opt_adagrad_epsilon"})
      EXPECT_EQ(count(k), 1u) << k;
  }
  return ev;
}

JobSpec target_spec(const std::string& name) {
  auto spec = small_spec(name);
  spec.train.batch_size = 128;
  spec.optimizer.dense = DenseOptimizerKind::adagrad;
  spec.optimizer.sparse = SparseOptimizerKind::rowwise_adagrad;
  spec.run_dir = run_dir(spec.name);
  spec.checkpoint.dir = spec.run_dir + "/checkpoints";
  spec.train.mllog = true;
  return spec;
}

// The planted signal is learnt within 400 steps (Trainer.LearnsPlantedSignal: AUC >= 0.75): the
// run stops at the first evaluation reaching 0.85 (after a few: 0.76 at step 5), with its checkpoint, and says so.
TEST(QualityTarget, StopsAtTheFirstEvaluationReachingIt) {
  auto spec = target_spec("target-reached");
  spec.train.steps = 400;
  spec.train.eval_interval = 5;
  spec.train.target_auc = 0.85;
  Trainer trainer(spec, *world->comm);
  const TrainResult result = trainer.train(quiet());
  ASSERT_TRUE(result.target.has_value());
  EXPECT_TRUE(result.target->reached);
  EXPECT_FALSE(result.stopped);
  EXPECT_EQ(result.target->step, result.steps);
  EXPECT_LT(result.steps, 400);
  EXPECT_EQ(result.steps % 5, 0);
  EXPECT_GT(result.target->seconds, 0);
  ASSERT_TRUE(result.eval.has_value());
  EXPECT_GE(result.eval->auc, 0.85);
  EXPECT_TRUE(result.last_checkpoint.ends_with(fmt::format("ckpt-{:09}.h5", result.steps))) << result.last_checkpoint;
  if (world->comm->rank() != 0) return;
  EXPECT_TRUE(fs::exists(result.last_checkpoint));
  const auto evals = records(spec.run_dir, "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_GE(evals.size(), 2u);  // the target is not reached at the first evaluation
  for (std::size_t i = 0; i + 1 < evals.size(); ++i) EXPECT_LT(evals[i]["auc"].get<double>(), 0.85) << evals[i];
  EXPECT_EQ(evals.back()["step"], result.steps);  // no evaluation after the one that reached it
  EXPECT_EQ(evals.back()["auc"].get<double>(), result.eval->auc);
  const auto target = records(spec.run_dir, "target");
  ASSERT_EQ(target.size(), 1u);
  EXPECT_EQ(target[0]["reached"], true);
  EXPECT_EQ(target[0]["step"], result.steps);
  EXPECT_EQ(target[0]["target_auc"], 0.85);
  std::ifstream log(spec.run_dir + "/train.log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find(fmt::format("target AUC 0.85 reached at step {} after", result.steps)), std::string::npos);
  const auto ev = check_mllog(spec.run_dir + "/mllog.txt", "success");
  std::size_t accuracies = 0;
  for (auto& e : ev) accuracies += e["key"] == "eval_accuracy";
  EXPECT_EQ(accuracies, evals.size());
  // Fractional epochs, as the reference logs them: steps / steps per epoch (40000 / 128 = 312).
  for (auto& e : ev)
    if (e["key"] == "eval_accuracy") { EXPECT_NEAR(e["metadata"]["epoch_num"].get<double>(), 0, 400.0 / 312); }
  EXPECT_DOUBLE_EQ(ev.back()["key"] == "run_stop" ? ev.back()["metadata"]["epoch_num"].get<double>() : -1,
                   result.steps / 312.0);
}

// An unreachable target: the run goes to its end and says so, with the best AUC; eval_per_epoch =
// 10 evaluates every ceil(625 / 10) = 63 steps and at the end.
TEST(QualityTarget, UnreachedRunsToTheEndAndSaysSo) {
  auto spec = target_spec("target-missed");
  spec.train.batch_size = 64;
  spec.train.steps = 130;
  spec.train.eval_per_epoch = 10;
  spec.train.eval_batches = 4;
  spec.train.target_auc = 1.0;
  Trainer trainer(spec, *world->comm);
  const TrainResult result = trainer.train(quiet());
  EXPECT_EQ(result.steps, 130);
  EXPECT_FALSE(result.stopped);
  ASSERT_TRUE(result.target.has_value());
  EXPECT_FALSE(result.target->reached);
  ASSERT_TRUE(result.eval.has_value());
  if (world->comm->rank() != 0) return;
  const auto evals = records(spec.run_dir, "eval");
  ASSERT_EQ(evals.size(), 3u);
  EXPECT_EQ(evals[0]["step"], 63);
  EXPECT_EQ(evals[1]["step"], 126);
  EXPECT_EQ(evals[2]["step"], 130);
  double best = 0;
  std::int64_t best_step = -1;
  for (auto& e : evals)
    if (e["auc"].get<double>() > best) best = e["auc"], best_step = e["step"];
  EXPECT_EQ(result.target->best_auc, best);
  EXPECT_EQ(result.target->best_step, best_step);
  const auto target = records(spec.run_dir, "target");
  ASSERT_EQ(target.size(), 1u);
  EXPECT_EQ(target[0]["reached"], false);
  EXPECT_EQ(target[0]["best_auc"].get<double>(), best);
  EXPECT_EQ(target[0]["step"], 130);
  std::ifstream log(spec.run_dir + "/train.log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("target AUC 1 not reached in 130 steps: best AUC"), std::string::npos) << text;
  check_mllog(spec.run_dir + "/mllog.txt", "aborted");
}

// Without mllog no MLPerf log is written.
TEST(QualityTarget, NoMlLogByDefault) {
  auto spec = small_spec("no-mllog");
  spec.run_dir = run_dir(spec.name);
  spec.train.steps = 4;
  Trainer trainer(spec, *world->comm);
  const TrainResult result = trainer.train(quiet());
  EXPECT_FALSE(result.target.has_value());
  if (world->comm->rank() == 0) { EXPECT_FALSE(fs::exists(spec.run_dir + "/mllog.txt")); }
}

// Each line's metadata names the place that logged the event: the caller's file and line, not
// MlLog's own (the defaulted LogSite argument is evaluated where the call is).
TEST(QualityTarget, MlLogNamesTheCallersLine) {
  const std::string dir = run_dir("mllog-site-" + std::to_string(world->comm->rank()));
  fs::create_directories(dir);
  {
    MlLog log(dir, true);
    log.event("probe");
  }
  const int line = __LINE__ - 2;
  std::vector<json> events;
  std::ifstream in(dir + "/mllog.txt");
  for (std::string text; std::getline(in, text);) events.push_back(json::parse(text.substr(std::strlen(":::MLLOG "))));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["metadata"]["lineno"], line);
  EXPECT_TRUE(events[0]["metadata"]["file"].get<std::string>().ends_with("test_quality_target.cpp"))
      << events[0]["metadata"]["file"];
}

std::string config_error(const std::string& train, const std::string& data = "eval = \"e.h5\"\n") {
  try {
    parse_job_spec("[data]\ntrain = \"t.h5\"\n" + data + "[train]\n" + train, "job.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

TEST(QualityTarget, ConfigErrors) {
  EXPECT_NE(config_error("eval_interval = 5\neval_per_epoch = 2\n").find("'train.eval_per_epoch'"), std::string::npos);
  EXPECT_NE(config_error("eval_per_epoch = 0\n").find("'train.eval_per_epoch'"), std::string::npos);
  EXPECT_NE(config_error("target_auc = 0.8\n", "").find("'train.target_auc' needs evaluation data"),
            std::string::npos);
  for (const char* bad : {"0.5", "1.01", "0", "\"0.8\""})
    EXPECT_NE(config_error(std::string("target_auc = ") + bad + "\n").find("'train.target_auc'"), std::string::npos)
        << bad;
  EXPECT_NE(config_error("mllog = 1\n").find("'train.mllog'"), std::string::npos);
  const auto spec = parse_job_spec("[data]\ntrain = \"t.h5\"\neval = \"e.h5\"\n[train]\ntarget_auc = 0.80275\n"
                                   "eval_per_epoch = 20\nmllog = true\n",
                                   "job.toml");
  EXPECT_EQ(spec.train.target_auc, 0.80275);
  EXPECT_EQ(spec.train.eval_per_epoch, 20);
  EXPECT_TRUE(spec.train.mllog);
}

}  // namespace
