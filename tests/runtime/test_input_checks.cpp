// The checks made before a job allocates or trains: every data file against the model (eval files
// included, each difference named with both values), model.tables shown in full, a batch larger
// than the data named as such, sizes past the machine refused by the memory estimate, and a
// checkpoint's step checked against its data position, with a resume already at its target a
// clean no-op. One rank: every check here is made alike on every rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "data/h5.hpp"
#include "data/synth.hpp"
#include "runtime/train/input_checks.hpp"
#include "runtime/train/memory_fit.hpp"
#include "trainer_test_support.hpp"

namespace recmix::runtime {
namespace {

using namespace testing_support;
[[maybe_unused]] const int registered = register_world();

// A synthetic file in the test's folder with the given shape (made once per name).
std::string make_data(const std::string& name, std::vector<std::int64_t> tables, int num_dense, std::int64_t rows = 500) {
  const std::string path = (fs::path(world->dir) / name).string();
  if (fs::exists(path)) return path;
  data::SynthOptions o;
  o.output = path;
  o.rows = rows;
  o.num_dense = num_dense;
  o.table_rows = std::move(tables);
  o.seed = 3;
  data::synthesize(o);
  return path;
}

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error of the expected type";
  return "";
}

JobSpec spec_with_eval(const std::string& name, const std::string& eval) {
  auto spec = small_spec(name);
  spec.data.eval = {eval};
  spec.run_dir = run_dir(name);
  spec.checkpoint.dir = spec.run_dir + "/checkpoints";
  return spec;
}

// Each eval file that differs from the model is refused when the trainer is built, before any
// step or checkpoint, naming the file, the field and both values.
TEST(InputChecks, EvalFilesAreCheckedBeforeTraining) {
  if (world->comm->size() != 1) GTEST_SKIP() << "one rank";
  auto& comm = *world->comm;
  struct Case {
    std::string file, expected;
  };
  const Case cases[] = {
      {make_data("eval-3-tables.h5", {50, 300, 7}, 5), "the table count is 3 (rows [50, 300, 7]); the model was built "
                                                       "for 4 (rows [50, 300, 7, 1000])"},
      {make_data("eval-4-dense.h5", kTables, 4), "the dense feature count is 4; the model was built for 5"},
      {make_data("eval-more-rows.h5", {50, 300, 9, 1000}, 5), "table 2's row count is 9; the model was built for 7"},
  };
  for (const Case& c : cases) {
    const auto spec = spec_with_eval("eval-check", c.file);
    const std::string e = error_of<DataError>([&] { Trainer t(spec, comm); });
    EXPECT_NE(e.find("eval file '" + c.file + "': " + c.expected), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(spec.checkpoint.dir)) << "nothing is written";
  }
  const auto missing = spec_with_eval("eval-missing", world->dir + "/no-eval.h5");
  const std::string e = error_of<IoError>([&] { Trainer t(missing, comm); });
  EXPECT_NE(e.find("data.eval: " + world->dir + "/no-eval.h5: no such file"), std::string::npos) << e;
  // recmix eval's files are checked the same way.
  Trainer t(small_spec("eval-after"), comm);
  const std::string later = error_of<DataError>([&] { t.evaluate({cases[2].file}); });
  EXPECT_NE(later.find("table 2's row count is 9"), std::string::npos) << later;
}

TEST(InputChecks, ModelTablesMismatchShowsBothLists) {
  auto spec = small_spec("tables");
  spec.model.table_rows = {50, 300, 8, 1000};
  const std::string e = error_of<ConfigError>([&] { Trainer t(spec, *world->comm); });
  EXPECT_NE(e.find("'model.tables' [50, 300, 8, 1000] (4 tables) disagrees with the dataset"), std::string::npos) << e;
  EXPECT_NE(e.find("[50, 300, 7, 1000] (4 tables)"), std::string::npos) << e;
}

// 16777216 samples a step on 40000 rows: the batch is named, not a failed allocation.
TEST(InputChecks, BatchLargerThanTheDataIsNamed) {
  auto spec = small_spec("huge-batch");
  spec.train.batch_size = 16777216;
  const std::string e = error_of<ConfigError>([&] { Trainer t(spec, *world->comm); });
  EXPECT_NE(e.find("'train.batch_size' = 16777216 is more than the 40000 rows of the training data"),
            std::string::npos)
      << e;
}

data::DatasetInfo info_of(std::vector<std::int64_t> tables, int num_dense = 5, std::int64_t rows = 40000) {
  data::DatasetInfo info;
  info.rows = rows;
  info.num_dense = num_dense;
  info.table_rows = std::move(tables);
  info.max_bag.assign(info.table_rows.size(), 1);
  info.files = {"train.h5"};
  return info;
}

// Sizes far past the machine: refused by the estimate with the capacity and the largest term.
TEST(MemoryFit, SizesPastTheMachineAreRefusedByTheEstimate) {
  auto spec = small_spec("fits");
  EXPECT_NO_THROW(check_memory_fits(spec, info_of(kTables), 1));
  ASSERT_GT(physical_memory_bytes(), 0.0);

  auto huge_table = small_spec("huge-table");
  std::string e = error_of<OutOfMemoryError>(
      [&] { check_memory_fits(huge_table, info_of({50, 1000000000000000, 7, 1000}), 1); });
  EXPECT_NE(e.find("job 'huge-table' cannot fit"), std::string::npos) << e;
  EXPECT_NE(e.find("above this machine's physical memory"), std::string::npos) << e;
  EXPECT_NE(e.find("the largest term: parameters (embedding tables and MLP weights)"), std::string::npos) << e;

  auto wide = small_spec("wide");
  wide.model.bottom_mlp = {2000000000, 8};
  e = error_of<OutOfMemoryError>([&] { check_memory_fits(wide, info_of(kTables), 1); });
  EXPECT_NE(e.find("job 'wide' cannot fit"), std::string::npos) << e;

  auto small_device = small_spec("small-device");
  small_device.device.memory_capacity = 20000;
  e = error_of<OutOfMemoryError>([&] { check_memory_fits(small_device, info_of(kTables), 1); });
  EXPECT_NE(e.find("above device.memory_capacity (19.5 KiB)"), std::string::npos) << e;
}

// The comparison worked by hand: the largest term is named, the margin left out, the host tier
// compared apart unless both share the physical memory.
TEST(MemoryFit, MisfitNamesEstimateCapacityAndLargestTerm) {
  sched::MemoryEstimate e;
  e.parameters = 100;
  e.activations = 300;
  e.margin = 1000;  // not compared
  MemoryCapacity c;
  c.device = 400;
  c.device_source = "device.memory_capacity";
  EXPECT_EQ(memory_misfit("j", e, c), "");
  c.device = 399;
  EXPECT_EQ(memory_misfit("j", e, c),
            "job 'j' cannot fit: its peak memory estimate per rank is 400 B, above device.memory_capacity (399 B); the "
            "largest term: activations and their gradients 300 B");
  c.device = 1000;
  e.host = 50;
  c.host = 49;
  c.host_source = "device.host_memory_capacity";
  EXPECT_EQ(memory_misfit("j", e, c),
            "job 'j' cannot fit: the host tier of its tables is estimated at 50 B per rank, above "
            "device.host_memory_capacity (49 B)");
  c.device_is_host = true;
  c.device_source = c.host_source = "this machine's physical memory";
  c.device = c.host = 449;
  EXPECT_NE(memory_misfit("j", e, c).find("450 B with the host tier"), std::string::npos) << memory_misfit("j", e, c);
}

// A checkpoint's step must lie in the epoch of its data position; a resume at or past the target
// does nothing, writes nothing and succeeds.
TEST(CheckpointStep, IsCheckedAndATargetReachedIsANoOp) {
  auto& comm = *world->comm;
  if (comm.size() != 1) GTEST_SKIP() << "one rank";
  auto spec = small_spec("step-check");
  spec.data.eval.clear();
  spec.run_dir = run_dir(spec.name);
  spec.checkpoint.dir = spec.run_dir + "/checkpoints";
  std::string ckpt;
  {
    Trainer t(spec, comm);
    ckpt = t.train(quiet()).last_checkpoint;  // step 20
  }
  ASSERT_TRUE(fs::exists(ckpt));
  const auto metrics_size = fs::file_size(spec.run_dir + "/metrics.jsonl");
  auto shorter = spec;
  shorter.train.steps = 10;
  {
    Trainer t(shorter, comm);
    const TrainResult r = t.train(quiet(0, ckpt));
    EXPECT_TRUE(r.already_reached);
    EXPECT_EQ(r.steps, 20);
    EXPECT_EQ(r.last_checkpoint, ckpt);
  }
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(spec.checkpoint.dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u) << "a checkpoint was written";
  EXPECT_EQ(fs::file_size(spec.run_dir + "/metrics.jsonl"), metrics_size) << "metrics were written";

  const std::string absurd = spec.run_dir + "/absurd.h5";
  fs::copy_file(ckpt, absurd);
  {
    h5::File f = h5::open_file(absurd, true);
    h5::write_attribute(f, "step", std::int64_t{1000000000000});
  }
  Trainer t(spec, comm);
  const std::string e = error_of<DataError>([&] { t.train(quiet(0, absurd)); });
  EXPECT_NE(e.find("checkpoint " + absurd + ": its step 1000000000000 lies outside the epoch of the data position "
                   "it saved (epoch 0, batch 20; at 625 batches per epoch of " + spec.data.train.front() +
                   ", steps 0..625)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace recmix::runtime
