// The control plane's message bodies (runtime/run/messages.hpp): each one written to JSON and
// read back gives the same struct, with the keys the scheduler's event log shows.
#include <gtest/gtest.h>

#include "runtime/run/messages.hpp"

using namespace recmix::runtime::run;

TEST(Messages, JobPlacementRoundTrips) {
  JobPlacement p;
  p.job = 7;
  p.launch = 12;
  p.name = "a";
  p.spec_text = "name = \"a\"\n";
  p.origin = "jobs.toml";
  p.base_dir = "/base";
  p.run_dir = "/run/jobs/a";
  p.ranks = {2, 0};
  p.threads = 3;
  p.device_kind = recmix::device::BackendKind::cpu_strict;
  p.memory_share = 1ull << 33;
  p.priority = -2;
  p.resume = true;
  p.sample_interval_s = 0.25;
  const auto q = JobPlacement::from_json(nlohmann::json::parse(p.to_json().dump()));
  EXPECT_EQ(q.job, 7);
  EXPECT_EQ(q.launch, 12);
  EXPECT_EQ(q.name, "a");
  EXPECT_EQ(q.spec_text, p.spec_text);
  EXPECT_EQ(q.origin, "jobs.toml");
  EXPECT_EQ(q.base_dir, "/base");
  EXPECT_EQ(q.run_dir, "/run/jobs/a");
  EXPECT_EQ(q.ranks, (std::vector<int>{2, 0}));
  EXPECT_EQ(q.threads, 3);
  EXPECT_EQ(q.device_kind, recmix::device::BackendKind::cpu_strict);
  EXPECT_EQ(p.to_json().at("device_kind"), "cpu-strict");
  EXPECT_EQ(q.memory_share, 1ull << 33);
  EXPECT_EQ(q.priority, -2);
  EXPECT_TRUE(q.resume);
  EXPECT_DOUBLE_EQ(q.sample_interval_s, 0.25);
  EXPECT_TRUE(q.cores.empty());  // set on the rank, never sent
}

TEST(Messages, JobSampleRoundTripsWithAndWithoutTheGpu) {
  JobSample s;
  s.launch = 4;
  s.rank = 3;
  s.step = 40;
  s.total_steps = 100;
  s.step_s = 0.5;
  s.data_wait_s = 0.125;
  s.dense_s = 0.25;
  s.embedding_s = 0.0625;
  s.allreduce_update_s = 0.03125;
  s.loss = 0.69;
  s.pool_current_bytes = 1000;
  s.pool_peak_bytes = 5000;
  s.busy_share = 0.75;
  auto check = [](const JobSample& a, const JobSample& b) {
    EXPECT_EQ(b.launch, a.launch);
    EXPECT_EQ(b.rank, a.rank);
    EXPECT_EQ(b.step, a.step);
    EXPECT_EQ(b.total_steps, a.total_steps);
    EXPECT_DOUBLE_EQ(b.step_s, a.step_s);
    EXPECT_DOUBLE_EQ(b.data_wait_s, a.data_wait_s);
    EXPECT_DOUBLE_EQ(b.dense_s, a.dense_s);
    EXPECT_DOUBLE_EQ(b.embedding_s, a.embedding_s);
    EXPECT_DOUBLE_EQ(b.allreduce_update_s, a.allreduce_update_s);
    EXPECT_DOUBLE_EQ(b.loss, a.loss);
    EXPECT_EQ(b.pool_current_bytes, a.pool_current_bytes);
    EXPECT_EQ(b.pool_peak_bytes, a.pool_peak_bytes);
    EXPECT_DOUBLE_EQ(b.busy_share, a.busy_share);
    ASSERT_EQ(b.gpu.has_value(), a.gpu.has_value());
    if (a.gpu) {
      EXPECT_DOUBLE_EQ(b.gpu->util, a.gpu->util);
      EXPECT_DOUBLE_EQ(b.gpu->memory_util, a.gpu->memory_util);
      EXPECT_EQ(b.gpu->memory_used_bytes, a.gpu->memory_used_bytes);
    }
  };
  const auto j = s.to_json();
  EXPECT_FALSE(j.contains("gpu_util"));
  check(s, JobSample::from_json(nlohmann::json::parse(j.dump())));
  s.gpu = JobSample::Gpu{0.9, 0.4, 123456789};
  const auto g = s.to_json();
  // The keys of the event "sample" in events.jsonl.
  for (const char* key : {"launch", "rank", "step", "total_steps", "step_s", "data_wait_s", "dense_s", "embedding_s",
                          "allreduce_update_s", "loss", "pool_current_bytes", "pool_peak_bytes", "busy_share",
                          "gpu_util", "gpu_memory_util", "gpu_memory_used_bytes"})
    EXPECT_TRUE(g.contains(key)) << key;
  EXPECT_EQ(g.size(), 16u);
  check(s, JobSample::from_json(nlohmann::json::parse(g.dump())));
}

TEST(Messages, JobReportRoundTripsForEachOutcome) {
  auto check = [](const JobReport& a, const JobReport& b) {
    EXPECT_EQ(b.launch, a.launch);
    EXPECT_EQ(b.rank, a.rank);
    EXPECT_EQ(b.job_rank, a.job_rank);
    EXPECT_EQ(b.steps, a.steps);
    EXPECT_EQ(b.loss, a.loss);
    EXPECT_EQ(b.samples_per_s, a.samples_per_s);
    EXPECT_EQ(b.checkpoint, a.checkpoint);
    EXPECT_EQ(b.pool_peak_bytes, a.pool_peak_bytes);
    ASSERT_EQ(b.eval.has_value(), a.eval.has_value());
    if (a.eval) {
      EXPECT_DOUBLE_EQ(b.eval->auc, a.eval->auc);
      EXPECT_DOUBLE_EQ(b.eval->logloss, a.eval->logloss);
    }
    EXPECT_EQ(b.error, a.error);
    EXPECT_EQ(b.out_of_memory, a.out_of_memory);
    EXPECT_EQ(b.peer, a.peer);
  };
  // Finished: the results.
  JobReport done;
  done.launch = 9;
  done.rank = 1;
  done.job_rank = 0;
  done.steps = 200;
  done.loss = 0.45;
  done.samples_per_s = 12345.5;
  done.checkpoint = "/run/jobs/a/checkpoints/ckpt_200.h5";
  done.pool_peak_bytes = 1u << 20;
  done.eval = JobReport::Eval{0.78, 0.47};
  const auto j = done.to_json();
  EXPECT_FALSE(j.contains("error"));
  EXPECT_EQ(j.at("eval").at("auc").get<double>(), 0.78);
  check(done, JobReport::from_json(nlohmann::json::parse(j.dump())));
  // Failed in training: the error, whether it was the pool and whether a peer's.
  JobReport failed;
  failed.launch = 9;
  failed.rank = 2;
  failed.job_rank = 1;
  failed.pool_peak_bytes = 77;
  failed.error = "out of memory: pool 'a' ...";
  failed.out_of_memory = true;
  check(failed, JobReport::from_json(nlohmann::json::parse(failed.to_json().dump())));
  failed.out_of_memory = false;
  failed.peer = true;
  check(failed, JobReport::from_json(nlohmann::json::parse(failed.to_json().dump())));
  // Failed before the job started on the rank (the executor's report): no job rank, no results.
  JobReport early;
  early.launch = 3;
  early.rank = 0;
  early.error = "comm error: ...";
  const auto e = early.to_json();
  EXPECT_FALSE(e.contains("job_rank"));
  EXPECT_FALSE(e.contains("steps"));
  check(early, JobReport::from_json(nlohmann::json::parse(e.dump())));
  // A report without a rank is the sender's.
  EXPECT_EQ(JobReport::from_json({{"launch", 1}}).rank, -1);
}
