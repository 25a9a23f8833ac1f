#include "embedding/sharded_embedding.hpp"

#include "core/error.hpp"

namespace recmix::embedding {

struct ShardedEmbedding::Impl {
  ShardingPlan plan;
  std::vector<TableSpec> tables;
  Pooling pooling;
  SparseOptimizerKind kind;
};

ShardedEmbedding::ShardedEmbedding(comm::Communicator&, device::Backend&, device::MemoryPool&,
                                   std::vector<TableSpec> tables, Pooling pooling, ShardingPlan plan,
                                   SparseOptimizerConfig optimizer, std::uint64_t)
    : impl_(std::make_unique<Impl>(Impl{std::move(plan), std::move(tables), pooling,
                                        parse_sparse_optimizer(optimizer)})) {}
ShardedEmbedding::~ShardedEmbedding() = default;
void ShardedEmbedding::forward(device::Stream&, std::span<const Bags>, int, float*) {
  throw Error("ShardedEmbedding::forward: not implemented yet");
}
void ShardedEmbedding::backward(device::Stream&, const float*) {
  throw Error("ShardedEmbedding::backward: not implemented yet");
}
std::vector<LocalShardView> ShardedEmbedding::local_shards() { return {}; }
const ShardingPlan& ShardedEmbedding::plan() const { return impl_->plan; }
int ShardedEmbedding::num_tables() const { return static_cast<int>(impl_->tables.size()); }
int ShardedEmbedding::dim() const { return impl_->tables.empty() ? 0 : impl_->tables[0].dim; }
Pooling ShardedEmbedding::pooling() const { return impl_->pooling; }
SparseOptimizerKind ShardedEmbedding::optimizer_kind() const { return impl_->kind; }
std::size_t ShardedEmbedding::bytes_sent_last_step() const { return 0; }
std::size_t ShardedEmbedding::local_bytes() const { return 0; }

}  // namespace recmix::embedding
