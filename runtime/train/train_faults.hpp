#pragma once
// Faults the failure-handling tests inject into a training run, as an explicit object that the
// caller passes in (TrainOptions::faults). Left as it is, a run has none. The command line fills
// it from RECMIX_FAULT_INJECTION="<job>:<step>:<rank>[:<where>]", a test hook: that rank of that
// job fails at that step as a crash would; and from RECMIX_STEP_DELAY_INJECTION="<job>:<rank>:
// <seconds>" ("*" for every job or rank): each step of that rank takes that much longer, so that
// a test that needs a run to last sets a floor under its time instead of hoping the machine is slow.
#include <cstdint>
#include <string_view>

namespace recmix::runtime {

struct TrainFaults {
  enum class Where {
    after,       // throw right after the step, between two steps' collectives (the default)
    mid,         // throw inside the step, after its forward exchange and before its backward collectives
    checkpoint,  // throw in that step's checkpoint write, before the file is opened
    nan,         // put a NaN in the first row of the rank's last embedding shard after the step
    stall,       // hold the rank after the step until a stop is requested (a signal finds the run unfinished)
  };
  std::int64_t step = -1;  // the step the fault is at (1-based, as logged); -1: no fault
  Where where = Where::after;
  double step_delay_s = 0;  // added after every step (a slow rank); 0: none

  bool at(Where w, std::int64_t s) const { return step > 0 && where == w && step == s; }
  bool any() const { return step > 0; }

  // The fault `text` (RECMIX_FAULT_INJECTION's form) names for this job and rank; none when it
  // names another job or rank. A value not of that form is a ConfigError that names the variable.
  static TrainFaults parse(std::string_view text, std::string_view job, int rank);
  // The delay `text` (RECMIX_STEP_DELAY_INJECTION's form) gives this job and rank; 0 when it names
  // another. A value not of that form is a ConfigError that names the variable.
  static double parse_step_delay(std::string_view text, std::string_view job, int rank);
  // parse() of RECMIX_FAULT_INJECTION and parse_step_delay() of RECMIX_STEP_DELAY_INJECTION; none
  // where they are not set.
  static TrainFaults from_environment(std::string_view job, int rank);
};

}  // namespace recmix::runtime
