// The learning-rate schedule (core/lr_schedule.hpp) at its breakpoints, against values worked
// out by hand from the DLRM references' rule: warm-up s / W, then 1, then
// ((D - k) / D)^power for the k-th decayed step, held after the last.
#include <gtest/gtest.h>

#include "core/lr_schedule.hpp"

namespace recmix {
namespace {

TEST(LrSchedule, NoneIsOneEverywhere) {
  const LrSchedule none;
  EXPECT_FALSE(none.active());
  for (std::int64_t s : {1, 2, 1000}) EXPECT_EQ(none.scale(s), 1.0f);
}

TEST(LrSchedule, WarmupConstantDecayAndHold) {
  const LrSchedule sc{4, 6, 4, 2.0};  // warm-up steps 1-4, constant 5-6, decay 7-10, held from 11
  EXPECT_TRUE(sc.active());
  EXPECT_FLOAT_EQ(sc.scale(1), 0.25f);
  EXPECT_FLOAT_EQ(sc.scale(2), 0.5f);
  EXPECT_FLOAT_EQ(sc.scale(4), 1.0f);
  EXPECT_FLOAT_EQ(sc.scale(5), 1.0f);
  EXPECT_FLOAT_EQ(sc.scale(6), 1.0f);
  EXPECT_FLOAT_EQ(sc.scale(7), 1.0f);             // (4/4)^2
  EXPECT_FLOAT_EQ(sc.scale(8), 0.5625f);          // (3/4)^2
  EXPECT_FLOAT_EQ(sc.scale(9), 0.25f);            // (2/4)^2
  EXPECT_FLOAT_EQ(sc.scale(10), 0.0625f);         // (1/4)^2
  EXPECT_FLOAT_EQ(sc.scale(11), 0.0625f);         // held
  EXPECT_FLOAT_EQ(sc.scale(1000000), 0.0625f);
}

TEST(LrSchedule, OtherPowersAndDecayAlone) {
  const LrSchedule linear{0, 0, 10, 1.0};  // decay from the first step, linear
  EXPECT_FLOAT_EQ(linear.scale(1), 1.0f);
  EXPECT_FLOAT_EQ(linear.scale(2), 0.9f);
  EXPECT_FLOAT_EQ(linear.scale(10), 0.1f);
  EXPECT_FLOAT_EQ(linear.scale(11), 0.1f);
  const LrSchedule warmup{3, 0, 0, 2.0};  // warm-up alone
  EXPECT_FLOAT_EQ(warmup.scale(1), 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(warmup.scale(3), 1.0f);
  EXPECT_FLOAT_EQ(warmup.scale(4), 1.0f);
}

}  // namespace
}  // namespace recmix
