#pragma once
// Writing checkpoints: what a checkpoint holds (CheckpointContent: the logical arrays, the same on
// every rank, and the rows this rank owns of them), the collective file write, and a writer that
// snapshots the content into host memory and writes it on a background thread while training
// goes on (docs/checkpoint-format.md, "Asynchronous writes").
#include <hdf5.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "runtime/checkpoint/checkpoint.hpp"

namespace recmix::runtime {

struct CheckpointArray {
  std::string name;  // path in the file: "dense/<param>", "embedding/<t>/weights", ...
  hsize_t rows = 0, cols = 0;
};

// Rows [first, first + count) of arrays[array], at data: device memory, or host memory when host.
struct CheckpointPiece {
  std::size_t array = 0;
  hsize_t first = 0, count = 0;
  const float* data = nullptr;
  bool host = false;
};

struct CheckpointContent {
  CheckpointMeta meta;
  std::int64_t dense_step_count = 0;
  int num_tables = 0;
  // How the tables are stored in the job (fp32, fp16, bf16), kept as attribute `storage` of each
  // /embedding/<t> group; the arrays themselves are fp32 whatever it is (16-bit values are exact there).
  std::string table_storage = "fp32";
  std::vector<CheckpointArray> arrays;  // every rank: the same arrays in the same order
  std::vector<CheckpointPiece> pieces;  // this rank's rows (replicated arrays: rank 0's)
  std::size_t bytes() const;            // of this rank's pieces
};

// The model's state as a checkpoint's content. Tiered tables are flushed to their host tier
// (local_shards), so the pieces point at it.
CheckpointContent describe_checkpoint(DlrmModel& model, const CheckpointMeta& meta, int rank);

// Faults the tests inject into checkpoint writes; left as they are, a run has none. delay_ms:
// each background write sleeps this long before it starts (a write outlasting the steps after
// it); failing_rank: the rank whose write of its rows fails (a full disk), -1 for none.
struct CheckpointFaults {
  std::atomic<int> delay_ms{0};
  std::atomic<int> failing_rank{-1};
};
CheckpointFaults& checkpoint_faults();

// Collective over comm (an MPI communicator): writes the content to path + ".tmp", with block
// checksums (checkpoint_checksum.hpp), syncs it and renames it onto path. hold_hdf5: keep the
// HDF5 lock for the whole write (otherwise each call takes it, so that a reader thread's calls
// go on between the pieces). On failure the temporary file is removed.
void write_checkpoint_file(const std::string& path, const CheckpointContent& content, device::Backend& backend,
                           comm::Communicator& comm, bool hold_hdf5);

// Host memory for a checkpoint snapshot: anonymous pages, huge pages where the kernel gives them
// (a 1 GiB copy into fresh 4 KiB pages spends most of its time in page faults), faulted in on
// a thread of its own so that the first snapshot does not pay for it.
class SnapshotBuffer {
 public:
  SnapshotBuffer() = default;
  ~SnapshotBuffer();
  SnapshotBuffer(const SnapshotBuffer&) = delete;
  SnapshotBuffer& operator=(const SnapshotBuffer&) = delete;
  // Room for `floats` floats (keeps the contents of none); pages are faulted in in the background.
  void reserve(std::size_t floats);
  // The buffer, once its pages are in.
  float* data();
  std::size_t bytes() const { return bytes_; }

 private:
  void release();
  float* data_ = nullptr;
  std::size_t bytes_ = 0, mapped_ = 0;
  std::thread touch_;
};

// At most one checkpoint write in flight, on a thread of its own, over a communicator of its own.
class AsyncCheckpointWriter {
 public:
  // Collective over comm (split for the writer's collectives). snapshot_bytes: the size of the
  // snapshots to come (CheckpointContent::bytes), whose memory is made ready in the background.
  AsyncCheckpointWriter(comm::Communicator& comm, device::Backend& backend, std::size_t snapshot_bytes = 0);
  ~AsyncCheckpointWriter();  // waits for a write in flight; its error is dropped
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Copies the content's pieces into this writer's host buffer (kept for the next write),
  // checking each block for values that are not finite while it is in cache: returns the first
  // such value as "<array> row <r> holds <v>", "" when there is none. None in flight.
  std::string snapshot(const CheckpointContent& content);
  // Writes the snapshot to path in the background. Collective over every rank's writer.
  void launch(const std::string& path);
  bool in_flight() const { return thread_.joinable(); }
  // Whether the write in flight has ended (local: ranks may see it at different times).
  bool finished() const { return done_.load(); }
  // Waits for the write in flight; rethrows its failure (every rank throws when any rank's write
  // failed). Returns the path written, "" when none was in flight.
  std::string wait();
  const std::string& path() const { return path_; }
  double write_seconds() const { return seconds_; }       // of the last write
  double snapshot_seconds() const { return snapshot_s_; }  // of the last copy
  std::size_t snapshot_bytes() const { return content_.bytes(); }

 private:
  std::unique_ptr<comm::Communicator> comm_;
  device::Backend& backend_;
  SnapshotBuffer buffer_;
  CheckpointContent content_;
  std::string path_;
  std::thread thread_;
  std::exception_ptr error_;
  bool failed_anywhere_ = false;
  std::atomic<bool> done_{false};
  double seconds_ = 0, snapshot_s_ = 0;
};

}  // namespace recmix::runtime
