#include "runtime/checkpoint/checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/error.hpp"
#include "data/h5.hpp"
#include "runtime/checkpoint/checkpoint_checksum.hpp"
#include "runtime/checkpoint/checkpoint_staging.hpp"
#include "runtime/checkpoint/checkpoint_write.hpp"
#include "embedding/sparse_optimizer.hpp"
#include "runtime/train/dlrm_model.hpp"

namespace recmix::runtime {
namespace {


// Opens a [* x cols] float dataset and checks that it holds rows [first, first + count).
h5::Dataset open_float_rows(hid_t file, const std::string& name, hsize_t first, hsize_t count, hsize_t cols,
                            const std::string& path) {
  auto dset = h5::open_dataset(file, name);
  auto dims = h5::shape(dset);
  if (dims.size() != 2 || dims[1] != cols || first + count > dims[0])
    throw DataError(fmt::format("{}: dataset '{}' has shape [{}], the model needs rows {}..{} of width {}", path, name,
                                fmt::join(dims, ", "), first, first + count, cols));
  return dset;
}

// DataError unless dataset `name` exists with exactly the shape `want` (extra rows, a missing
// column or a transposed array are refused, naming the dataset and both shapes).
void require_shape(hid_t file, const std::string& name, const std::vector<hsize_t>& want, const std::string& path) {
  if (!h5::exists(file, name))
    throw DataError(fmt::format("{}: no dataset /{} (the model needs float32 [{}])", path, name, fmt::join(want, ", ")));
  const auto dims = h5::shape(h5::open_dataset(file, name));
  if (dims != want)
    throw DataError(fmt::format("{}: /{} has shape [{}], the model needs [{}]", path, name, fmt::join(dims, ", "),
                                fmt::join(want, ", ")));
}

// Reads rows [first, first + count) of a [* x cols] float dataset into device memory after
// checking its shape; every value must be finite (a diverged or damaged model is refused), and
// when `verify`, the rows' blocks must match the file's checksums (checkpoint_checksum.hpp).
void read_device_rows(device::Backend& backend, device::Stream& stream, hid_t file, const std::string& name,
                      hsize_t first, hsize_t count, hsize_t cols, float* out, const std::string& path,
                      bool host = false, bool verify = false) {
  auto dset = open_float_rows(file, name, first, count, cols, path);
  const std::string where = fmt::format("{}: /{}", path, name);
  BlockChecksums sums(first, count);
  auto check = [&](const float* p, hsize_t from, hsize_t n) {
    if (auto bad = non_finite_in(p, from, n, cols, where); !bad.empty())
      throw DataError(bad + ": not a model to train or evaluate (diverged or damaged)");
    if (verify) sums.add(from, n, cols, p);
  };
  if (host || backend.host_accessible(device::Tier::device)) {
    h5::read_rows(dset, first, count, out);
    check(out, first, count);
  } else {
    for_each_piece(count, cols, [&](hsize_t r, hsize_t n, std::vector<float>& host) {
      h5::read_rows(dset, first + r, n, host.data());
      check(host.data(), first + r, n);
      backend.copy(out + r * cols, host.data(), host.size() * sizeof(float), stream);
      stream.synchronize();  // the next piece reuses the host buffer
    });
  }
  if (verify) verify_checksums(file, name, first, count, cols, sums, path);
}

h5::File open_checkpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) throw IoError(fmt::format("checkpoint '{}' does not exist", path));
  auto file = h5::open_file(path);
  if (!h5::has_attribute(file, "format") || h5::read_string_attribute(file, "format") != kCheckpointFormat)
    throw DataError(fmt::format("{}: not a recmix checkpoint (attribute 'format')", path));
  auto version = h5::read_int_attribute(file, "version");
  if (version < 1 || version > kCheckpointVersion)
    throw DataError(fmt::format("{}: checkpoint version {} is not supported (this build reads {})", path, version,
                                kCheckpointVersion));
  return file;
}

}  // namespace

std::string first_non_finite(DlrmModel& model, bool dense_only) {
  device::Backend& backend = model.backend();
  auto stream = backend.create_stream();
  const bool direct = backend.host_accessible(device::Tier::device);
  auto scan = [&](const float* p, hsize_t rows, hsize_t cols, const std::string& name, bool host) -> std::string {
    if (host || direct) return non_finite_in(p, 0, rows, cols, name);
    std::string bad;
    for_each_piece(rows, cols, [&](hsize_t r, hsize_t n, std::vector<float>& buffer) {
      if (!bad.empty()) return;
      backend.copy(buffer.data(), p + r * cols, buffer.size() * sizeof(float), *stream);
      stream->synchronize();
      bad = non_finite_in(buffer.data(), r, n, cols, name);
    });
    return bad;
  };
  for (auto& p : model.dense_parameters())
    if (auto bad = scan(p.value, p.count, 1, "dense parameter " + p.name, false); !bad.empty()) return bad;
  if (dense_only) return {};
  for (auto& s : model.dense_optimizer().state())
    if (auto bad = scan(s.value, s.count, 1, "dense optimizer state " + s.name, false); !bad.empty()) return bad;
  for (auto& shard : model.embedding().local_shards()) {
    const hsize_t n = shard.row_end - shard.row_begin;
    if (n == 0) continue;
    if (auto bad = scan(shard.weights, n, shard.dim, fmt::format("embedding table {} (rows from {})", shard.table,
                                                                  shard.row_begin), shard.host_memory);
        !bad.empty())
      return bad;
    for (std::size_t i = 0; i < shard.state.size(); ++i)
      if (auto bad = scan(shard.state[i].second, n, shard.state_counts[i] / n,
                          fmt::format("embedding table {} {} (rows from {})", shard.table, shard.state[i].first,
                                      shard.row_begin),
                          shard.host_memory);
          !bad.empty())
        return bad;
  }
  return {};
}

void require_finite_model(DlrmModel& model, comm::Communicator& comm, std::int64_t step, const std::string& path) {
  agree_finite_model(first_non_finite(model, false), comm, step, path);
}

void agree_finite_model(const std::string& bad, comm::Communicator& comm, std::int64_t step, const std::string& path) {
  std::int32_t bad_ranks = bad.empty() ? 0 : 1;
  comm.all_reduce_sum(&bad_ranks, &bad_ranks, 1, comm::DataType::i32);
  if (bad_ranks > 0)
    throw DivergedError(fmt::format("training diverged: at step {} {}; {} not written", step,
                                    bad.empty() ? fmt::format("{} other rank(s) hold a value that is not finite",
                                                              bad_ranks)
                                                : bad,
                                    path));
}

void save_checkpoint(const std::string& path, DlrmModel& model, const CheckpointMeta& meta, comm::Communicator& comm) {
  write_checkpoint_file(path, describe_checkpoint(model, meta, comm.rank()), model.backend(), comm, true);
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  auto file = open_checkpoint(path);
  CheckpointMeta m;
  m.step = h5::read_int_attribute(file, "step");
  m.position.epoch = h5::read_int_attribute(file, "data_epoch");
  m.position.batch = h5::read_int_attribute(file, "data_batch");
  m.seed = static_cast<std::uint64_t>(h5::read_int_attribute(file, "seed"));
  m.world_size = static_cast<int>(h5::read_int_attribute(file, "world_size"));
  m.table_rows = h5::read_int_vector_attribute(file, "table_rows");
  m.num_dense = static_cast<int>(h5::read_int_attribute(file, "num_dense"));
  m.job_spec = h5::read_string_attribute(file, "job_spec");
  // A step count, data position or shape no run can have written: the file is damaged.
  auto require = [&](bool ok, const char* attribute, std::int64_t value, const char* rule) {
    if (!ok) throw DataError(fmt::format("{}: attribute {} = {} {}: the checkpoint is damaged", path, attribute, value, rule));
  };
  require(m.step >= 0, "step", m.step, "is negative");
  require(m.position.epoch >= 0 && m.position.epoch <= m.step, "data_epoch", m.position.epoch,
          "is not in 0..step (an epoch takes a step at least)");
  require(m.position.batch >= 0, "data_batch", m.position.batch, "is negative");
  require(m.world_size >= 1, "world_size", m.world_size, "is not positive");
  require(m.num_dense >= 0, "num_dense", m.num_dense, "is negative");
  for (auto rows : m.table_rows) require(rows > 0, "table_rows", rows, "holds a table without rows");
  return m;
}

void load_checkpoint(const std::string& path, DlrmModel& model) {
  auto file = open_checkpoint(path);
  auto table_rows = h5::read_int_vector_attribute(file, "table_rows");
  if (table_rows != model.table_rows())
    throw DataError(fmt::format("{}: the checkpoint's tables ({}) differ from the model's ({})", path,
                                fmt::join(table_rows, ", "), fmt::join(model.table_rows(), ", ")));
  // Version 1 files have no checksums; from version 2 every array's are checked. A file with a
  // checksums group is checked whatever its version says, so that a damaged version attribute
  // cannot switch the checks off.
  const bool verify = h5::read_int_attribute(file, "version") >= 2 || h5::exists(file, "checksums");
  if (verify && h5::read_int_attribute(file, "checksum_block_rows") != static_cast<std::int64_t>(kChecksumBlockRows))
    throw DataError(fmt::format("{}: attribute checksum_block_rows is not {}: the checkpoint is damaged", path,
                                kChecksumBlockRows));
  // Every array with exactly the model's shape, whichever rows this rank loads.
  const hsize_t dim = static_cast<hsize_t>(model.embedding().dim());
  for (auto& p : model.dense_parameters()) require_shape(file, "dense/" + p.name, {p.count, 1}, path);
  for (auto& s : model.dense_optimizer().state()) require_shape(file, "dense_optimizer/" + s.name, {s.count, 1}, path);
  const auto kind = model.embedding().optimizer_kind();
  const auto state_width = static_cast<hsize_t>(embedding::state_per_row(kind, static_cast<int>(dim)));
  for (int t = 0; t < model.num_tables(); ++t) {
    const auto rows = static_cast<hsize_t>(model.table_rows()[t]);
    require_shape(file, fmt::format("embedding/{}/weights", t), {rows, dim}, path);
    if (state_width > 0)
      require_shape(file, fmt::format("embedding/{}/{}", t, embedding::state_name(kind)), {rows, state_width}, path);
  }
  device::Backend& backend = model.backend();
  auto stream = backend.create_stream();
  for (auto& p : model.dense_parameters())
    read_device_rows(backend, *stream, file, "dense/" + p.name, 0, p.count, 1, p.value, path, false, verify);
  auto dense_opt = h5::open_group(file, "dense_optimizer");
  model.dense_optimizer().set_step_count(h5::read_int_attribute(dense_opt, "step_count"));
  for (auto& s : model.dense_optimizer().state())
    read_device_rows(backend, *stream, file, "dense_optimizer/" + s.name, 0, s.count, 1, s.value, path, false,
                     verify);
  for (auto& shard : model.embedding().local_shards()) {
    const hsize_t n = shard.row_end - shard.row_begin;
    if (n == 0) continue;
    std::string base = fmt::format("embedding/{}/", shard.table);
    read_device_rows(backend, *stream, file, base + "weights", shard.row_begin, n, dim, shard.weights, path,
                     shard.host_memory, verify);
    for (std::size_t i = 0; i < shard.state.size(); ++i)
      read_device_rows(backend, *stream, file, base + shard.state[i].first, shard.row_begin, n,
                       shard.state_counts[i] / n, shard.state[i].second, path, shard.host_memory, verify);
  }
  model.embedding().shards_written();
}

void load_weights(const std::string& path, DlrmModel& model) {
  auto file = h5::open_file(path);
  device::Backend& backend = model.backend();
  auto stream = backend.create_stream();
  const auto params = model.dense_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const mlp::Param& p = params[i];
    // A matrix takes its shape from its layer's bias: an MLP's or a full-rank cross layer's
    // weight [out, in], a low-rank cross layer's V [rank, n] and W [n, rank] (docs/checkpoint-format.md).
    std::vector<hsize_t> want{p.count};
    for (const char* suffix : {".weight", ".V", ".W"}) {
      const std::string_view s(suffix);
      if (p.name.size() <= s.size() || !std::string_view(p.name).ends_with(s)) continue;
      for (const auto& b : params)
        if (b.name == p.name.substr(0, p.name.size() - s.size()) + ".bias" && b.count > 0)
          want = s == ".V" ? std::vector<hsize_t>{p.count / b.count, b.count}
                           : std::vector<hsize_t>{b.count, p.count / b.count};
    }
    const std::string name = "dense/" + p.name;
    require_shape(file, name, want, path);
    const auto values = h5::read_array<float>(file, name);
    backend.copy(p.value, values.data(), values.size() * sizeof(float), *stream);
    stream->synchronize();
  }
  const int dim = model.embedding().dim();
  for (int t = 0; t < model.num_tables(); ++t)
    require_shape(file, fmt::format("embedding/{}", t), {static_cast<hsize_t>(model.table_rows()[t]), static_cast<hsize_t>(dim)},
                  path);
  for (auto& shard : model.embedding().local_shards()) {
    const hsize_t n = shard.row_end - shard.row_begin;
    if (n == 0) continue;
    read_device_rows(backend, *stream, file, fmt::format("embedding/{}", shard.table), shard.row_begin, n, dim,
                     shard.weights, path, shard.host_memory);
  }
  model.embedding().shards_written();
}

}  // namespace recmix::runtime
