#pragma once
// The training-data reader: gives each rank its contiguous share of every global batch, read by
// row hyperslabs from one or more HDF5 files (docs/dataset-format.md), with optional
// deterministic shuffling, a background thread that reads the next batches ahead, and a
// position that a checkpoint saves and restores exactly.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/format.hpp"

namespace recmix::data {

// This rank's slice of one global batch.
struct Batch {
  std::int64_t size = 0;                              // samples on this rank
  std::vector<float> dense;                           // [size x num_dense], row-major
  std::vector<float> labels;                          // [size]
  std::vector<std::vector<std::int64_t>> offsets;     // per table: size+1 entries (CSR; one-hot: 0,1,2,...)
  std::vector<std::vector<std::int64_t>> indices;     // per table
  std::int64_t global_index = 0;                      // index of this global batch within the epoch
  // ReaderOptions::packed_one_hot: the indices as the dataset stores them, sample i's index into
  // table t at one_hot[i * tables + t]; offsets and indices are then empty.
  bool packed = false;
  int tables = 0;                                     // when packed
  std::vector<std::int32_t> one_hot;                  // when packed: [size x tables]
};

struct ReaderOptions {
  std::int64_t global_batch = 128;
  int rank = 0;
  int world = 1;
  bool shuffle = false;
  std::uint64_t seed = 0;
  std::int64_t shuffle_window = 0;  // rows shuffled together after the block shuffle (0: auto)
  std::int64_t shuffle_block = 0;   // rows per block whose order is shuffled (0: auto = 4096)
  int prefetch = 2;                 // batches read ahead in a background thread (0: synchronous)
  bool drop_last = true;            // a final partial global batch is dropped (false: served, split over ranks)
  bool validate = true;             // check values (indices < table rows, finite dense, labels in [0,1]) on read
  // One-hot datasets whose tables int32 can index: batches hold the indices row-major as int32,
  // as stored (Batch::one_hot), which in file order are read straight into the batch. Otherwise
  // ignored: multi-hot datasets always give one CSR per table.
  bool packed_one_hot = false;
};

// Next global batch to be read; saved in checkpoints.
struct ReaderPosition {
  std::int64_t epoch = 0;
  std::int64_t batch = 0;
  bool operator==(const ReaderPosition&) const = default;
};

class Reader {
 public:
  // Independent I/O: each rank opens the files on its own and reads only its rows.
  Reader(std::vector<std::string> files, ReaderOptions options);
  // Collective I/O: `mpi_comm` points to an MPI_Comm (void* keeps MPI out of this header) whose
  // ranks all construct a Reader with the same files and options and then call next(), seek()
  // and pause_prefetch() in the same sequence; options.rank/world are taken from the communicator.
  // MPI must be initialised with MPI_THREAD_MULTIPLE when prefetch > 0.
  Reader(std::vector<std::string> files, ReaderOptions options, void* mpi_comm);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const DatasetInfo& info() const;
  const ReaderOptions& options() const;
  std::int64_t batches_per_epoch() const;
  // Fills `out` with this rank's share of the next global batch; false at the end of an epoch
  // (out untouched), and the next call starts the next epoch. The buffers of `out` are reused, and
  // one-hot offsets (0, 1, ..., size) that this reader wrote into them earlier are not written
  // again: hand next() a batch that is new or as this reader left it, not one whose contents were
  // changed in place since.
  bool next(Batch& out);
  ReaderPosition position() const;
  // Restores a position; the following next() returns exactly what it would have returned then.
  void seek(ReaderPosition p);
  // Waits for the read in flight and starts no new one until the next next()/seek(). Call it on
  // every rank before other collective HDF5 work (a checkpoint) while a collective reader lives.
  void pause_prefetch();

  // The dataset row (0-based over all files) at position `pos` of `epoch`'s sample order.
  std::int64_t sample_row(std::int64_t epoch, std::int64_t pos) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace recmix::data
