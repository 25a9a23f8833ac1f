#pragma once
// Checkpoints: one self-describing HDF5 file holding the logical (unsharded) model, so a job
// saved on N ranks resumes on M. Layout in docs/checkpoint-format.md. Written collectively
// through parallel HDF5 (each owner writes its embedding rows) to a temporary name, then renamed.
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "data/reader.hpp"

namespace recmix::runtime {

class DlrmModel;

struct CheckpointMeta {
  std::int64_t step = 0;
  data::ReaderPosition position;  // the next global batch to train on
  std::uint64_t seed = 0;
  int world_size = 1;
  std::string job_spec;  // TOML text the job was started with
  std::vector<std::int64_t> table_rows;
  int num_dense = 0;
};

inline constexpr const char* kCheckpointFormat = "recmix-checkpoint";
inline constexpr int kCheckpointVersion = 2;  // 2: block checksums; 1 is still read

// The first value the model holds on this rank that is not finite (dense parameters; unless
// dense_only, also the dense optimizer state and this rank's embedding shards with their state),
// as "<tensor> row <r> holds <value>"; "" when every value is finite. Device memory is read
// through host staging.
std::string first_non_finite(DlrmModel& model, bool dense_only);

// Collective: every rank scans what it holds (first_non_finite) and the ranks agree; when any
// holds a value that is not finite, every rank throws DivergedError naming the step, the tensor
// and the row (on the rank that has it) and `path`, which is then not to be written.
void require_finite_model(DlrmModel& model, comm::Communicator& comm, std::int64_t step, const std::string& path);
// The agreement of require_finite_model on what each rank found already (`bad`: its first value
// that is not finite, "" when none): throws DivergedError on every rank when any rank found one.
void agree_finite_model(const std::string& bad, comm::Communicator& comm, std::int64_t step, const std::string& path);

// Collective over comm (an MPI communicator). Overwrites path atomically.
void save_checkpoint(const std::string& path, DlrmModel& model, const CheckpointMeta& meta,
                     comm::Communicator& comm);
// Reads only the metadata (any rank, no communication).
CheckpointMeta read_checkpoint_meta(const std::string& path);
// Loads weights and optimizer state into a model built with the same shape (any sharding).
void load_checkpoint(const std::string& path, DlrmModel& model);

// Initial weights from a weights file (docs/checkpoint-format.md, "Weights in"): every dense
// parameter as /dense/<name> in its natural shape (weight [out, in], bias [out]) and every table
// as /embedding/<t> [rows, dim], float32, all of them, each shape exactly the model's; DataError
// naming the dataset and both shapes otherwise. Collective (each rank reads the rows it owns).
void load_weights(const std::string& path, DlrmModel& model);

}  // namespace recmix::runtime
