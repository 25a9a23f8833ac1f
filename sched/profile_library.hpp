#pragma once
// The profile library: a JobProfile (utilisation, solo step time, peak memory per rank,
// communication share) for every job type the scheduler may meet. DLRM types come from the
// roofline model of a machine (dlrm_profile.hpp); other types come from public measurements
// (Lucid solo profiles: GPU and memory-controller utilisation and memory; Muri: per-stage
// CPU / GPU / network times; Gavel: job types with measured pair throughputs). The runtime
// will later replace entries with measured profiles.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sched/job_spec.hpp"
#include "sched/machine_model.hpp"
#include "sched/pair_data.hpp"
#include "sched/utilisation.hpp"

namespace recmix::sched {

class ProfileLibrary {
 public:
  explicit ProfileLibrary(MachineModel machine) : machine_(std::move(machine)) {}
  const MachineModel& machine() const { return machine_; }

  // Roofline profile of a DLRM preset trained on `ranks` ranks (cached), its tables stored in
  // table_bytes() bytes a weight.
  const JobProfile& dlrm(std::string_view preset, int ranks);
  // 4 (fp32, the presets' default) or 2 (fp16, bf16): for the presets' profiles from now on.
  void set_table_bytes(int bytes);
  int table_bytes() const { return table_bytes_; }
  // The presets' MLPs with bf16 GEMMs ([precision] dense = "bf16"), from now on.
  void set_bf16_gemms(bool on);
  bool bf16_gemms() const { return bf16_gemms_; }

  // Adds every solo profile of a measured dataset as a type (Lucid: utilisation and memory;
  // Gavel: no utilisation, memory = default_memory_bytes). Returns the type names added.
  std::vector<std::string> add_measured(const PairDataset& data, double default_memory_bytes);
  // Adds a type with a known profile (Muri jobs, own CSV profiles, runtime measurements).
  void add(const JobProfile& profile);

  const JobProfile* find(std::string_view type) const;
  const std::map<std::string, JobProfile>& measured() const { return measured_; }

 private:
  MachineModel machine_;
  std::map<std::string, JobProfile> measured_;
  std::map<std::pair<std::string, int>, JobProfile> dlrm_;
  int table_bytes_ = 4;
  bool bf16_gemms_ = false;
};

// Communication share of a non-DLRM model on multi-GPU data parallelism, by model family
// (large dense models communicate more): VGG 0.12, BERT / Transformer / GPT / LM 0.08, ResNet-50 0.05,
// everything else 0.03.
double default_comm_fraction(std::string_view model_name);

// Profile of a Muri trace job: shares are resource_time_{0,1,2} / iteration_time read as
// host CPU (data loading / environment), GPU compute and network (zero for one-GPU jobs).
JobProfile muri_profile(std::string_view model, double iteration_time, double cpu_time, double gpu_time,
                        double network_time, double memory_bytes);

}  // namespace recmix::sched
