#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "runtime/train/train_faults.hpp"

using namespace recmix;
using namespace recmix::runtime;
using Where = TrainFaults::Where;

TEST(TrainFaults, NamesTheStepAndPlaceForItsJobAndRankOnly) {
  const TrainFaults f = TrainFaults::parse("job:40:1:mid", "job", 1);
  EXPECT_TRUE(f.any());
  EXPECT_EQ(f.step, 40);
  EXPECT_EQ(f.where, Where::mid);
  EXPECT_TRUE(f.at(Where::mid, 40));
  EXPECT_FALSE(f.at(Where::mid, 39));
  EXPECT_FALSE(f.at(Where::after, 40));
  EXPECT_FALSE(TrainFaults::parse("job:40:1:mid", "job", 0).any());    // another rank
  EXPECT_FALSE(TrainFaults::parse("job:40:1:mid", "other", 1).any());  // another job
  EXPECT_FALSE(TrainFaults::parse("job:40:1", "jo", 1).any());        // a prefix of the name is not it
}

TEST(TrainFaults, EveryPlaceAndTheDefault) {
  EXPECT_EQ(TrainFaults::parse("j:3:0", "j", 0).where, Where::after);
  EXPECT_EQ(TrainFaults::parse("j:3:0:after", "j", 0).where, Where::after);
  EXPECT_EQ(TrainFaults::parse("j:3:0:checkpoint", "j", 0).where, Where::checkpoint);
  EXPECT_EQ(TrainFaults::parse("j:3:0:nan", "j", 0).where, Where::nan);
  EXPECT_EQ(TrainFaults::parse("j:3:0:stall", "j", 0).where, Where::stall);
  // A job name may hold colons: the step and the rank are the last two fields.
  const TrainFaults f = TrainFaults::parse("a:b:7:2:nan", "a:b", 2);
  EXPECT_EQ(f.step, 7);
  EXPECT_EQ(f.where, Where::nan);
}

TEST(TrainFaults, NoneByDefault) {
  const TrainFaults f;
  EXPECT_FALSE(f.any());
  EXPECT_FALSE(f.at(Where::after, -1));
}

TEST(TrainFaults, AMalformedValueIsAConfigErrorNamingTheVariable) {
  for (const char* text : {"job", "job:4", ":4:0", "job:x:0", "job:0:0", "job:4:-1", "job:4:1:sideways", "job:4:1x"}) {
    try {
      TrainFaults::parse(text, "job", 0);
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("RECMIX_FAULT_INJECTION"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
}

TEST(TrainFaults, AStepDelayForItsJobAndRankOrForEvery) {
  EXPECT_DOUBLE_EQ(TrainFaults::parse_step_delay("job:1:0.002", "job", 1), 0.002);
  EXPECT_EQ(TrainFaults::parse_step_delay("job:1:0.002", "job", 0), 0);    // another rank
  EXPECT_EQ(TrainFaults::parse_step_delay("job:1:0.002", "other", 1), 0);  // another job
  EXPECT_DOUBLE_EQ(TrainFaults::parse_step_delay("*:*:0.5", "any", 3), 0.5);
  EXPECT_DOUBLE_EQ(TrainFaults::parse_step_delay("job:*:1", "job", 7), 1);
  EXPECT_DOUBLE_EQ(TrainFaults::parse_step_delay("a:b:0:0.25", "a:b", 0), 0.25);  // a name with a colon
  for (const char* bad : {"job:1", "job:1:x", "job:1:-1", "job:1:11", "job:-1:0.1", "job:r:0.1", ":1:0.1"}) {
    try {
      TrainFaults::parse_step_delay(bad, "job", 1);
      ADD_FAILURE() << bad << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("RECMIX_STEP_DELAY_INJECTION"), std::string::npos) << e.what();
    }
  }
}
