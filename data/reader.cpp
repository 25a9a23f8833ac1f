#include "data/reader.hpp"

#include "core/error.hpp"

namespace recmix::data {

class Reader::Impl {
 public:
  DatasetInfo info;
  ReaderOptions options;
  ReaderPosition position;
};

Reader::Reader(std::vector<std::string> files, ReaderOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->info = open_dataset_info(files);
  impl_->options = options;
}
Reader::Reader(std::vector<std::string> files, ReaderOptions options, void*) : Reader(std::move(files), options) {}
Reader::~Reader() = default;
const DatasetInfo& Reader::info() const { return impl_->info; }
const ReaderOptions& Reader::options() const { return impl_->options; }
std::int64_t Reader::batches_per_epoch() const { return impl_->info.rows / impl_->options.global_batch; }
bool Reader::next(Batch&) { throw Error("Reader::next: not implemented yet"); }
ReaderPosition Reader::position() const { return impl_->position; }
void Reader::seek(ReaderPosition p) { impl_->position = p; }
void Reader::pause_prefetch() {}
std::int64_t Reader::sample_row(std::int64_t, std::int64_t pos) const { return pos; }

}  // namespace recmix::data
