// Reading one batch: this rank's rows by row hyperslabs, checked and laid out one array per table
// (or as CSR for multi-hot data), the packed reads of one-hot batches, and the one-hot offsets.
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/file_layout.hpp"
#include "data/h5.hpp"
#include "data/reader_checks.hpp"
#include "data/reader_impl.hpp"
#include "data/reader_runs.hpp"

namespace recmix::data {

using namespace detail;

// Reads batch `pos` into out. defer_checks: a packed batch in file order may come back with its
// values unchecked (the return value says so), for the consumer to check (values_ok) while
// this thread reads on.
bool Reader::Impl::read_batch(ReaderPosition pos, Batch& out, bool defer_checks) {
  if (staged()) {
    out.global_index = pos.batch;
    if (packed) {
      const bool check = opt.validate && !defer_checks;
      if (read_packed(pos.batch, out, check)) return opt.validate && !check;
    } else {
      if (pos.batch < stage.first || pos.batch >= stage.end) read_unit(pos.batch);
      if (!stage.direct) {
        serve_staged(pos.batch, out);
        return false;
      }
    }
    // the batch could not be read whole or holds a bad value: read alone, as below, it
    // reports what is wrong
  }
  const auto [g_lo, g_hi, lo, n] = slice(pos.batch);
  const std::int64_t g = g_hi - g_lo;

  // rows of this rank, and the files the whole global batch touches (collective mode)
  std::vector<std::pair<std::int64_t, std::int64_t>> rows(static_cast<std::size_t>(n));  // (row, slot)
  std::vector<char> touched(files.size(), 0);
  {
    std::lock_guard<std::mutex> lock(shuffle_mutex);
    for (std::int64_t i = 0; i < n; ++i) rows[i] = {row_locked(pos.epoch, lo + i), i};
    if (collective) {
      if (!opt.shuffle) {
        if (g > 0)
          for (int f = file_of(g_lo); f <= file_of(g_hi - 1); ++f) touched[f] = 1;
      } else {
        for (std::int64_t p = g_lo; p < g_hi; ++p) touched[file_of(row_locked(pos.epoch, p))] = 1;
      }
    }
  }
  out.global_index = pos.batch;
  if (opt.shuffle && !collective) {
    gather_from_blocks(rows, out);
  } else {
    if (opt.shuffle) std::sort(rows.begin(), rows.end());
    read_rows(rows, !opt.shuffle, touched, out);
  }
  if (packed) pack_one_hot(out);
  return false;
}

// The checks of ReaderOptions::validate on a packed batch that read_batch left unchecked.
bool Reader::Impl::values_ok(const Batch& b) const {
  return all_finite(b.dense.data(), b.dense.size()) && labels_ok(b.labels.data(), b.labels.size()) &&
         indices_ok(b.one_hot.data(), b.size, info.num_tables(), max_rows.data());
}

// Batch b in file order, packed: this rank's rows go straight from the file into the batch (with
// pread where the storage is plain, otherwise one HDF5 read per dataset and file) and, with
// `check`, are checked in place. False when a read fails or a value is bad; the caller then
// reads the batch by the per-table path, which names the file, dataset and row at fault.
bool Reader::Impl::read_packed(std::int64_t b, Batch& out, bool check) {
  const int D = info.num_dense, T = info.num_tables();
  read_ahead_for(b, b + 1, unit_batches());
  std::vector<std::int64_t> at;
  const std::vector<Piece> pieces = pieces_of(b, b + 1, &at);
  const std::int64_t n = at.back();
  out.size = n;
  out.packed = true;
  out.tables = T;
  out.dense.resize(static_cast<std::size_t>(n * D));
  out.labels.resize(static_cast<std::size_t>(n));
  out.one_hot.resize(static_cast<std::size_t>(n * T));
  out.offsets.clear();
  out.indices.clear();
  bool ok = true;
  try {
    h5::Lock lock(h5::api_mutex());
    for (const Piece& p : pieces) {
      OpenFile& file = files[p.file];
      const std::vector<Run> run{p.run};
      const auto len = static_cast<std::size_t>(p.run.len);
      // plain storage straight from the file with pread, anything else through HDF5; each
      // piece checked as soon as it is read, while it is in cache
      auto read = [&](h5::Dataset& dataset, Extent& e, hsize_t cols, auto* dest) {
        using V = std::remove_pointer_t<decltype(dest)>;
        const std::int64_t per_row = e.row_bytes / static_cast<std::int64_t>(sizeof(V));
        const int fd = file.read_fd.get();
        if (e.plain && fd >= 0 && for_each_segment(dataset.get(), e, p.run, [&](std::int64_t at, std::int64_t rows, std::int64_t j) {
              return pread_all(fd, dest + j * per_row, rows * e.row_bytes, at);
            }))
          return;
        read_runs_into(dataset, run, cols, dest, xfer());
      };
      if (D > 0) {
        float* dense = out.dense.data() + p.at * D;
        read(file.dense, file.dense_extent, static_cast<hsize_t>(D), dense);
        if (check && !all_finite(dense, len * D)) return false;
      }
      float* labels = out.labels.data() + p.at;
      read(file.labels, file.labels_extent, 0, labels);
      if (check && !labels_ok(labels, len)) return false;
      if (T == 0) continue;
      std::int32_t* dest = out.one_hot.data() + p.at * T;
      if (file.sparse32) {
        read(file.sparse, file.sparse_extent, static_cast<hsize_t>(T), dest);
        if (check && !indices_ok(dest, p.run.len, T, max_rows.data())) return false;
        continue;
      }
      scratch_sparse64.resize(static_cast<std::size_t>(p.run.len * T));
      read_runs_into(file.sparse, run, static_cast<hsize_t>(T), scratch_sparse64.data(), xfer());
      for (std::int64_t k = 0; k < p.run.len * T; ++k) {  // int64 files: narrowed, out of range fails
        const std::int64_t v = scratch_sparse64[k];
        ok &= v >= 0 && v <= max64[k % T];
        dest[k] = static_cast<std::int32_t>(v);
      }
    }
  } catch (...) {
    return false;
  }
  return ok;
}

// Turns a batch read by the per-table path into the packed layout. An index int32 cannot hold
// becomes -1, so that the embedding layer reports it as out of range.
void Reader::Impl::pack_one_hot(Batch& out) const {
  const int T = info.num_tables();
  const std::int64_t n = out.size;
  out.one_hot.resize(static_cast<std::size_t>(n * T));
  for (int t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = out.indices[t][i];
      out.one_hot[i * T + t] = v >= 0 && v <= INT32_MAX ? static_cast<std::int32_t>(v) : -1;
    }
  out.offsets.clear();
  out.indices.clear();
  out.packed = true;
  out.tables = T;
}

// Reads `rows` ((row, slot) sorted by row) into `out` (slot order). in_order: slot i holds the
// i-th smallest row, so values go straight into place. In collective mode every file that
// `touched` marks takes part in the reads, with an empty selection where this rank has no row.
void Reader::Impl::read_rows(const std::vector<std::pair<std::int64_t, std::int64_t>>& rows, bool in_order,
                             const std::vector<char>& touched, Batch& out) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const int T = info.num_tables();
  shape_batch(out, n);
  // multi-hot: per table, each slot's index list gathered before packing into CSR
  MultiHotSlots slots;
  if (!info.multi_hot) {
    for (int t = 0; t < T; ++t) out.indices[t].resize(static_cast<std::size_t>(n));
    one_hot_offsets(out, n);
  } else {
    slots.begin.assign(T, std::vector<std::int64_t>(n, 0));
    slots.len.assign(T, std::vector<std::int64_t>(n, 0));
    slots.gathered.resize(T);
  }

  h5::Lock lock(h5::api_mutex());
  std::size_t k = 0;
  for (int f = 0; f < static_cast<int>(files.size()); ++f) {
    const std::size_t k0 = k;
    while (k < rows.size() && rows[k].first < file_start[f + 1]) ++k;
    if (k == k0 && !(collective && touched[f])) continue;
    std::vector<Run> runs;
    for (std::size_t i = k0; i < k; ++i) {
      std::int64_t r = rows[i].first - file_start[f];
      if (!runs.empty() && runs.back().start + runs.back().len == r)
        ++runs.back().len;
      else
        runs.push_back({r, 1});
    }
    const FileRows part{f, runs, rows, k0, static_cast<std::int64_t>(k - k0), in_order};
    read_dense_labels(part, out);
    if (!info.multi_hot)
      read_one_hot(part, out);
    else
      gather_multi_hot(part, slots);
  }
  if (info.multi_hot) pack_multi_hot(slots, n, out);
}

// One file's dense values and labels, checked, into their slots.
void Reader::Impl::read_dense_labels(const FileRows& part, Batch& out) {
  const int D = info.num_dense;
  const int f = part.file;
  const std::size_t k0 = part.k0;
  const std::int64_t m = part.m;
  const auto& rows = part.rows;
  auto local_row = [&](std::int64_t j) { return rows[k0 + static_cast<std::size_t>(j)].first - file_start[f]; };
  OpenFile& file = files[f];
  float* dense = out.dense.data() + k0 * D;
  float* labels = out.labels.data() + k0;
  if (!part.in_order) {
    scratch_dense.resize(static_cast<std::size_t>(m * D));
    scratch_labels.resize(static_cast<std::size_t>(m));
    dense = scratch_dense.data();
    labels = scratch_labels.data();
  }
  read_runs_into(file.dense, part.runs, static_cast<hsize_t>(D), (m * D) != 0 ? dense : nullptr, xfer());
  read_runs_into(file.labels, part.runs, 0, m ? labels : nullptr, xfer());
  if (opt.validate) {
    const std::size_t bad = first_non_finite(dense, static_cast<std::size_t>(m * D));
    if (bad < static_cast<std::size_t>(m * D))
      bad_value(f, "dense", local_row(static_cast<std::int64_t>(bad) / D),
                "column " + std::to_string(bad % D) + " is not finite");
    for (std::int64_t j = 0; j < m; ++j)
      if (!(labels[j] >= 0.0f && labels[j] <= 1.0f))
        bad_value(f, "labels", local_row(j), "label " + std::to_string(labels[j]) + " outside [0, 1]");
  }
  if (!part.in_order)
    for (std::int64_t j = 0; j < m; ++j) {
      const std::int64_t slot = rows[k0 + j].second;
      std::copy_n(dense + j * D, D, out.dense.data() + slot * D);
      out.labels[slot] = labels[j];
    }
}

// One file's one-hot indices, checked, into one array per table.
void Reader::Impl::read_one_hot(const FileRows& part, Batch& out) {
  const int T = info.num_tables();
  if (T == 0) return;
  const int f = part.file;
  const std::size_t k0 = part.k0;
  const std::int64_t m = part.m;
  const bool in_order = part.in_order;
  const auto& rows = part.rows;
  auto local_row = [&](std::int64_t j) { return rows[k0 + static_cast<std::size_t>(j)].first - file_start[f]; };
  OpenFile& file = files[f];
  // row-major [m x T] -> one array per table: read in order, T sequential write streams
  auto transpose = [&](const auto* src) {
    TableColumns columns(out.indices);
    std::int64_t** out_t = columns.data();
    const std::vector<std::int64_t>& limit = info.table_rows;
    bool bad = false;
    if (in_order) {
      for (int t = 0; t < T; ++t) out_t[t] += k0;
      using S = std::remove_cv_t<std::remove_reference_t<decltype(*src)>>;
      if constexpr (sizeof(S) == 4)
        bad = transpose_widen(src, T, m, out_t, max32.data());
      else
        bad = transpose_widen(src, T, m, out_t, max64.data());
    } else
    for (std::int64_t j = 0; j < m; ++j) {
      const std::int64_t slot = rows[k0 + j].second;
      const auto* row = src + j * T;
      for (int t = 0; t < T; ++t) {
        const auto v = static_cast<std::int64_t>(row[t]);
        out_t[t][slot] = v;
        bad |= static_cast<std::uint64_t>(v) >= static_cast<std::uint64_t>(limit[t]);
      }
    }
    if (opt.validate && bad)
      for (std::int64_t j = 0; j < m; ++j)
        for (int t = 0; t < T; ++t) {
          const auto v = static_cast<std::int64_t>(src[j * T + t]);
          if (v < 0 || v >= info.table_rows[t])
            bad_value(f, "sparse", local_row(j),
                      "column " + std::to_string(t) + ": index " + std::to_string(v) +
                          " outside table rows [0, " + std::to_string(info.table_rows[t]) + ")");
        }
  };
  if (file.sparse32) {
    scratch_sparse32.resize(static_cast<std::size_t>(m * T));
    read_runs_into(file.sparse, part.runs, static_cast<hsize_t>(T), m ? scratch_sparse32.data() : nullptr, xfer());
    transpose(scratch_sparse32.data());
  } else {
    scratch_sparse64.resize(static_cast<std::size_t>(m * T));
    read_runs_into(file.sparse, part.runs, static_cast<hsize_t>(T), m ? scratch_sparse64.data() : nullptr, xfer());
    transpose(scratch_sparse64.data());
  }
}

// One file's multi-hot bags, checked, gathered per table and slot (packed by pack_multi_hot).
void Reader::Impl::gather_multi_hot(const FileRows& part, MultiHotSlots& slots) {
  const int T = info.num_tables();
  const int f = part.file;
  const std::size_t k0 = part.k0;
  const auto& rows = part.rows;
  OpenFile& file = files[f];
  std::vector<std::int64_t> foffsets, findices;
  for (int t = 0; t < T; ++t) {
    const std::string name = "sparse/" + std::to_string(t);
    std::vector<Run> offset_runs;
    for (const Run& r : part.runs) offset_runs.push_back({r.start, r.len + 1});
    read_runs(file.offsets[t], offset_runs, 0, foffsets, xfer());
    std::vector<Run> index_runs;
    std::size_t at = 0;
    for (const Run& r : offset_runs) {
      for (std::int64_t j = 0; j < r.len; ++j) {
        const std::int64_t o = foffsets[at + j];
        const bool bad = o < 0 || o > file.nnz[t] || (j > 0 && o < foffsets[at + j - 1]);
        if (bad)
          bad_value(f, name + "/offsets", r.start + j,
                    "offset " + std::to_string(o) + " not non-decreasing within [0, " +
                        std::to_string(file.nnz[t]) + "]");
      }
      index_runs.push_back({foffsets[at], foffsets[at + r.len - 1] - foffsets[at]});
      at += static_cast<std::size_t>(r.len);
    }
    read_runs(file.indices[t], index_runs, 0, findices, xfer());
    // walk samples in file order: each sample's indices follow the previous one's
    std::size_t sample = k0, off_at = 0;
    std::int64_t idx_at = 0;
    for (const Run& r : offset_runs) {
      for (std::int64_t j = 0; j + 1 < r.len; ++j, ++sample) {
        const std::int64_t len = foffsets[off_at + j + 1] - foffsets[off_at + j];
        // max_bag sizes buffers downstream (tiered tables' staging slots): a longer bag is refused.
        if (!info.max_bag.empty() && len > info.max_bag[t])
          bad_value(f, name + "/offsets", r.start + j,
                    "a bag of " + std::to_string(len) + " indices, above the attribute max_bag's " +
                        std::to_string(info.max_bag[t]) + " for table " + std::to_string(t));
        const std::int64_t slot = rows[sample].second;
        slots.begin[t][slot] = static_cast<std::int64_t>(slots.gathered[t].size());
        slots.len[t][slot] = len;
        for (std::int64_t e = 0; e < len; ++e) {
          const std::int64_t v = findices[idx_at + e];
          if (opt.validate && (v < 0 || v >= info.table_rows[t]))
            bad_value(f, name + "/indices", foffsets[off_at + j] + e,
                      "index " + std::to_string(v) + " outside table rows [0, " +
                          std::to_string(info.table_rows[t]) + ") (sample row " + std::to_string(r.start + j) +
                          ")");
          slots.gathered[t].push_back(v);
        }
        idx_at += len;
      }
      off_at += static_cast<std::size_t>(r.len);
    }
  }
}

// The gathered bags as CSR, one offsets and one indices array per table, in slot order.
void Reader::Impl::pack_multi_hot(const MultiHotSlots& slots, std::int64_t n, Batch& out) const {
  const int T = info.num_tables();
  for (int t = 0; t < T; ++t) {
    auto& offs = out.offsets[t];
    auto& idx = out.indices[t];
    offs.resize(static_cast<std::size_t>(n + 1));
    offs[0] = 0;
    idx.clear();
    for (std::int64_t i = 0; i < n; ++i) {
      const auto b = slots.gathered[t].begin() + slots.begin[t][i];
      idx.insert(idx.end(), b, b + slots.len[t][i]);
      offs[i + 1] = static_cast<std::int64_t>(idx.size());
    }
  }
}

// --- one-hot offsets: 0, 1, ..., n, rewritten only where iota_known cannot vouch for them ---

bool Reader::Impl::holds_iota(const std::vector<std::int64_t>& o, std::size_t size) const {
  if (o.size() != size) return false;
  auto it = iota_known.find(o.data());
  if (it == iota_known.end() || it->second != size) return false;
  for (std::size_t k = 0; k <= 8; ++k) {  // spot check: nothing rewrote it in place
    const std::size_t at = (size - 1) * k / 8;
    if (o[at] != static_cast<std::int64_t>(at)) return false;
  }
  return true;
}

void Reader::Impl::one_hot_offsets(Batch& out, std::int64_t n) {
  const auto size = static_cast<std::size_t>(n + 1);
  out.offsets.resize(static_cast<std::size_t>(info.num_tables()));
  for (std::vector<std::int64_t>& o : out.offsets) {
    if (holds_iota(o, size)) continue;
    o.resize(size);
    std::iota(o.begin(), o.end(), std::int64_t{0});
    if (iota_known.size() >= 4096) iota_known.clear();  // forget buffers long gone
    iota_known[o.data()] = size;
  }
}

}  // namespace recmix::data
