#pragma once
// Structured fuzzing of HDF5 files: instead of damaging a file's bytes (which HDF5 1.10 itself
// does not always survive), the fuzz input is read as a list of edits made through the HDF5 API
// to a valid file: delete an attribute or a dataset, rewrite an attribute with another type,
// shape or value (integers of every width and signedness, floats, fixed and variable-length
// strings), replace a dataset with one of another type or shape, overwrite some of its elements
// with chosen values (NaN, infinities, -1, huge numbers), add objects, move one object onto
// another's name. The file stays a well-formed HDF5 file, so what the fuzzer finds is recmix's:
// a layout or value it accepts that it should refuse, or a crash in its own checks.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace recmix::fuzz {

// Reads a fuzz input as a stream of small numbers; past its end every read is 0.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint64_t bytes(int n);                 // n little-endian bytes
  std::size_t below(std::size_t n);           // in [0, n); 0 when n == 0
  std::string text(std::size_t max_length);   // a length byte, then that many bytes

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// The edits made, one line each (for a finding's report).
struct EditLog {
  std::vector<std::string> lines;
  std::string text() const;
};

// Applies at most `max_edits` edits read from `input` to the HDF5 file at `path` (opened read-write
// and closed again). The objects edited are the file's own (every group, dataset and attribute,
// found by visiting it), so one edit list means different things to different base files.
EditLog edit_h5_file(const std::string& path, ByteReader& input, int max_edits = 6);

// Every dataset of a file: its path ("/embedding/0/weights"), shape and HDF5 type class.
struct DatasetShape {
  std::string path;
  std::vector<unsigned long long> dims;
  int type_class = -1;
  bool operator==(const DatasetShape&) const = default;
};
std::vector<DatasetShape> dataset_shapes(const std::string& file);

}  // namespace recmix::fuzz
