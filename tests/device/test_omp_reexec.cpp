// ensure_passive_omp_wait_policy re-executes the program with OMP_WAIT_POLICY=PASSIVE, and the
// process keeps its name (ps, top and ss showed "exe" when it re-executed /proc/self/exe itself).
// Started without OMP_WAIT_POLICY (tests/device/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "device/cpu/omp_wait_policy.hpp"

namespace {
std::string program_name;
}

TEST(OmpWaitPolicy, ReexecutedPassiveUnderItsOwnName) {
  ASSERT_NE(std::getenv("OMP_WAIT_POLICY"), nullptr);
  EXPECT_STREQ(std::getenv("OMP_WAIT_POLICY"), "PASSIVE");
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  EXPECT_EQ(name, program_name.substr(0, 15));  // the kernel keeps 15 characters
}

int main(int argc, char** argv) {
  recmix::device::cpu::ensure_passive_omp_wait_policy(argv);
  const std::string self = argv[0];
  program_name = self.substr(self.find_last_of('/') + 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
