// ShardedEmbedding's sparse update: the owner's entries grouped by row, so that each row the batch
// touched takes its gradients in the order of the global batch and is updated once, on the host
// path (CPU backend) and the device path (CUDA, cpu-strict); tiered tables' cold rows are updated
// in their staging slots, or in the host tier with cold_update = host. Pooling and the exchanges
// that come before are in embedding_exchange.cpp.
#include <algorithm>
#include <cstdint>
#include <tuple>

#include "embedding/radix_sort.hpp"
#include "embedding/sharded_embedding_impl.hpp"

namespace recmix::embedding {

// Groups the entries of the owner CSR by row. A stable LSD radix sort on the row (11 bits a pass,
// linear in the entries) finds each row's entries in CSR order, which is the order of the global
// batch, so duplicates are summed in the same order whatever the thread or rank count. The groups
// are then emitted in the order of their first entry: the update reads the gradient vectors
// almost sequentially and only the weight rows at random (prefetched), where row order would make
// both streams random (measured: about 1.5x slower on the Kaggle tables).
void ShardedEmbedding::Impl::group_rows(std::int64_t n_bags, const std::int64_t* grad_pos,
                                        const float* scale) {
  const std::int64_t n = own_offsets[n_bags];
  // Raw pointers: stores through the vectors' int64 elements would otherwise make the compiler
  // reload every vector's data pointer inside the loops.
  sort_rows.resize(n);
  sort_entry.resize(n);
  tmp_rows.resize(n);
  tmp_entry.resize(n);
  std::int64_t* rows = sort_rows.data();
  std::int64_t* entry = sort_entry.data();
  std::int64_t* rows_tmp = tmp_rows.data();
  std::int64_t* entry_tmp = tmp_entry.data();
  std::copy(own_rows.begin(), own_rows.begin() + n, rows);
  for (std::int64_t e = 0; e < n; ++e) entry[e] = e;
  std::vector<std::int64_t> count;
  std::tie(rows, entry) = detail::radix_sort(rows, entry, rows_tmp, entry_tmp, n, detail::bits_below(device_rows()), 11, count);
  // Bag of every entry.
  bag_of_entry.resize(n);
  std::int64_t* bag = bag_of_entry.data();
  const std::int64_t* off = own_offsets.data();
  for (std::int64_t j = 0; j < n_bags; ++j)
    for (std::int64_t k = off[j]; k < off[j + 1]; ++k) bag[k] = j;
  // group_at[e] = start (in sorted order) of the group whose first entry is e, or -1; scanning e
  // upwards then lists the groups by first entry.
  group_at.assign(n, -1);
  std::int64_t* first = group_at.data();
  std::int64_t groups = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (i == 0 || rows[i] != rows[i - 1]) {
      first[entry[i]] = i;
      ++groups;
    }
  unique_rows.resize(groups);
  entry_offsets.resize(groups + 1);
  entry_grad.resize(n);
  entry_scale.resize(scale ? n : 0);
  std::int64_t* unique = unique_rows.data();
  std::int64_t* offsets = entry_offsets.data();
  std::int64_t* grad = entry_grad.data();
  float* scales = entry_scale.data();
  offsets[0] = 0;
  std::int64_t out = 0, g = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t i = first[e];
    if (i < 0) continue;
    const std::int64_t row = rows[i];
    unique[g] = row;
    for (; i < n && rows[i] == row; ++i, ++out) {
      const std::int64_t j = bag[entry[i]];
      grad[out] = grad_pos ? grad_pos[j] : j;
      if (scale) scales[out] = scale[j];
    }
    offsets[++g] = out;
  }
}

void ShardedEmbedding::Impl::update_on_device(device::Stream& stream, const float* dev_grad, bool scaled) {
  if (!grouping) grouping = std::make_unique<DeviceGrouping>(backend, pool);
  // The device one-hot path built the owner CSR on the device only: a bag a row, one row a bag.
  const std::int64_t n_bags = device_one_hot_step ? std::int64_t(num_tables) * batch
                                                  : static_cast<std::int64_t>(own_offsets.size()) - 1;
  const std::int64_t entries = device_one_hot_step ? n_bags : own_offsets[n_bags];
  grouping->group(stream, device_one_hot_step ? nullptr : dev_own_offsets.data(), dev_own_rows.data(), n_bags, entries,
                  detail::bits_below(device_rows()), scaled ? dev_own_scale.data() : nullptr);
  kernels::UpdateRows f{weights.data(), state.data(), dim, kind, opt.lr, opt.eps, nullptr, nullptr, nullptr, nullptr,
                        dev_grad};
  grouping->fill(f);
  update_rows(stream, grouping->launch_size(), f);
  if (tiers && tiers->cold_update() == ColdUpdate::host) update_cold_on_host(stream, dev_grad, scaled);
  if (tiers) tiers->updated(stream);
}

// cold_update = host on a device backend (Hotline's split): the device has updated every row in
// its slots, the staged copies included, which are dropped; the host applies the same update to
// the cold rows in the host tier, from the gradients brought over and grouped here, with the same
// functor run on the host.
void ShardedEmbedding::Impl::update_cold_on_host(device::Stream& stream, const float* dev_grad, bool scaled) {
  const std::int64_t n_bags = static_cast<std::int64_t>(own_offsets.size()) - 1;
  host_grad.resize(std::max<std::size_t>(std::size_t(n_bags) * dim, 1));
  backend.copy(host_grad.data(), dev_grad, std::size_t(n_bags) * dim * sizeof(float), stream);
  stream.synchronize();
  group_rows(n_bags, nullptr, scaled ? own_scale.data() : nullptr);
  const std::int64_t hot = tiers->hot_rows();
  split_rows[1].clear();
  split_grad[1].clear();
  split_scale[1].clear();
  split_offsets[1].assign(1, 0);
  for (std::size_t g = 0; g < unique_rows.size(); ++g) {
    if (unique_rows[g] < hot) continue;
    split_rows[1].push_back(tiers->staged_row(unique_rows[g]));
    for (std::int64_t e = entry_offsets[g]; e < entry_offsets[g + 1]; ++e) {
      split_grad[1].push_back(entry_grad[e]);
      if (!entry_scale.empty()) split_scale[1].push_back(entry_scale[e]);
    }
    split_offsets[1].push_back(static_cast<std::int64_t>(split_grad[1].size()));
  }
  tiers->before_host_update();
  const kernels::UpdateRows f{host_tier_weights(),
                              tiers->host_state(),
                              dim,
                              kind,
                              opt.lr,
                              opt.eps,
                              split_rows[1].data(),
                              split_offsets[1].data(),
                              split_grad[1].data(),
                              split_scale[1].empty() ? nullptr : split_scale[1].data(),
                              host_grad.data()};
  const auto n = static_cast<std::int64_t>(split_rows[1].size());
  if (half_tables()) {
    const kernels::UpdateRowsHalf h = host_tier_half_update(f);
    for (std::int64_t u = 0; u < n; ++u) h(u);
  } else {
    for (std::int64_t u = 0; u < n; ++u) f(u);
  }
}

// The host path's update (CPU backend): the groups of group_rows(), the gradient vectors in grad.
void ShardedEmbedding::Impl::update_on_host(device::Stream& stream, const float* grad) {
  if (tiers && tiers->cold_update() == ColdUpdate::host) return update_split(stream, grad);
  kernels::UpdateRows f{weights.data(),       state.data(),          dim,
                        kind,                 opt.lr,                opt.eps,
                        unique_rows.data(),   entry_offsets.data(),  entry_grad.data(),
                        entry_scale.empty() ? nullptr : entry_scale.data(), grad};
  update_rows(stream, static_cast<std::int64_t>(unique_rows.size()), f);
  if (tiers) tiers->updated(stream);
}

// cold_update = host (Hotline's split): the groups are parted into hot rows, updated in their
// device slots, and staged cold rows, updated in the host tier by their local rows (the staged
// copies are dropped). Each row's update is the same arithmetic on the same values either way.
void ShardedEmbedding::Impl::update_split(device::Stream& stream, const float* grad) {
  const std::int64_t groups = static_cast<std::int64_t>(unique_rows.size());
  const std::int64_t hot = tiers->hot_rows();
  for (int p = 0; p < 2; ++p) {
    split_rows[p].clear();
    split_grad[p].clear();
    split_scale[p].clear();
    split_offsets[p].assign(1, 0);
  }
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t slot = unique_rows[g];
    const int p = slot < hot ? 0 : 1;
    split_rows[p].push_back(p == 0 ? slot : tiers->staged_row(slot));
    for (std::int64_t e = entry_offsets[g]; e < entry_offsets[g + 1]; ++e) {
      split_grad[p].push_back(entry_grad[e]);
      if (!entry_scale.empty()) split_scale[p].push_back(entry_scale[e]);
    }
    split_offsets[p].push_back(static_cast<std::int64_t>(split_grad[p].size()));
  }
  tiers->before_host_update();
  float* w[2] = {weights.data(), host_tier_weights()};
  float* st[2] = {state.data(), tiers->host_state()};
  for (int p = 0; p < 2; ++p) {
    kernels::UpdateRows f{w[p],
                          st[p],
                          dim,
                          kind,
                          opt.lr,
                          opt.eps,
                          split_rows[p].data(),
                          split_offsets[p].data(),
                          split_grad[p].data(),
                          split_scale[p].empty() ? nullptr : split_scale[p].data(),
                          grad};
    const auto n = static_cast<std::int64_t>(split_rows[p].size());
    if (p == 0)
      update_rows(stream, n, f);
    else if (half_tables())
      launch(backend, stream, n, host_tier_half_update(f));
    else
      launch(backend, stream, n, f);
  }
  tiers->updated(stream);
}

void ShardedEmbedding::Impl::update_rows(device::Stream& stream, std::int64_t n, const kernels::UpdateRows& f) {
  if (!half_tables()) return launch(backend, stream, n, f);
  launch(backend, stream, n, half_update(f));
}

}  // namespace recmix::embedding
