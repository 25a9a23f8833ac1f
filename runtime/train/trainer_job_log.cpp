// The trainer's opening log lines: the job, its sharding, precision, device work and tiers.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string>

#include "embedding/cpu/half_rows.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/trainer.hpp"

namespace recmix::runtime {
namespace {

// How this backend runs TF32 GEMMs, for the job's precision line.
std::string tf32_way(const device::Backend& backend) {
  return backend.runs_kernels_on_host()
             ? "tf32 (emulated: operands cut to TF32, fp32 sums)"
             : "tf32 (tensor cores, fp32 sums)";
}

}  // namespace

// The run's opening lines: the job, its sharding, precision and tiers.
void Trainer::log_job(spdlog::logger& log, const data::Reader& reader, std::int64_t total_steps) const {
  log.info("job '{}': {} rank(s), {}, {} tables, {} dense features, global batch {}, {} steps ({} per epoch)",
            spec_.name, comm_.size(), backend_->description(), table_rows_.size(), num_dense_,
            spec_.train.batch_size, total_steps, reader.batches_per_epoch());
  log.info("sharding plan:\n{}", plan_->describe());
  {
    const auto storage = model_->embedding().storage();
    const bool host_rows = storage.type != half::Storage::fp32 && device::device_memory_is_host(*backend_);
    log.info("precision: dense GEMMs {}, embedding tables {}{}{}", model_->dense_in_bf16()                                 ? "bf16 (fp32 sums)"
              : backend_->fp32_math() == device::Fp32Math::tf32 ? tf32_way(*backend_)
                                                                 : "fp32",
              half::to_string(storage.type),
              storage.type == half::Storage::fp32 ? ""
              : storage.stochastic                ? " (updates rounded stochastically)"
                                                  : " (updates rounded to nearest)",
              !host_rows                                   ? ""
              : embedding::cpu::half_rows_vectorised() ? ", rows converted 16 at a time (AVX-512, F16C)"
                                                       : ", rows converted one element at a time (no AVX-512 with F16C)");
  }
  log.info("device work: {}", model_->uses_graphs()
                                  ? "the step's dense pieces replayed from captured graphs (device.graphs)"
                                  : "issued eagerly, launch by launch");
  if (model_->l2_window_bytes() > 0)
    log.info("L2 window: {} of {} embedding rows kept in the persisting L2 (device.l2_window)",
             device::format_bytes(model_->l2_window_bytes()), model_->embedding().tiered() ? "hot" : "local");

  if (model_->embedding().tiered()) {
    const auto& e = spec_.embedding;
    log.info("embedding tiers: {}, hot set by {}{}, cold updates on the {}; device tier {} on rank {}, host tier {}",
              e.device_budget > 0 ? "device budget " + device::format_bytes(e.device_budget)
                                  : fmt::format("hot fraction {}", e.hot_fraction),
              spelling(e.hot_set), e.rerank_interval > 0 || e.hot_set == embedding::HotSet::lfu ? ", re-ranked" : "",
              spelling(e.cold_update),
              device::format_bytes(model_->embedding().local_bytes()), comm_.rank(),
              device::format_bytes(model_->embedding().host_tier_bytes()));
  }
}

}  // namespace recmix::runtime
