#pragma once
// The built-in example job (`recmix train --demo`): a small synthetic dataset with a planted
// signal, generated into <run_dir>/data on first use, and a small DLRM that learns it.
#include <string>

#include "comm/communicator.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {

// The embedded job spec text (data paths relative to the run directory).
const std::string& demo_job_toml();
// The built-in example run (`recmix run --demo`): four small jobs of different shapes on the
// demo data, one arriving later (data paths relative to the run directory).
const std::string& demo_jobs_toml();
// Generates the demo data into <run_dir>/data if missing (rank 0; the others wait).
void prepare_demo_data(const std::string& run_dir, comm::Communicator& comm);
// Generates the demo data if missing (rank 0; the others wait) and returns the job spec.
JobSpec prepare_demo_job(const std::string& run_dir, comm::Communicator& comm);

}  // namespace recmix::runtime
