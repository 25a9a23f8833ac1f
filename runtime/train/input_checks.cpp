#include "runtime/train/input_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {

void check_file_shape(const std::string& role, const data::DatasetInfo& info, const std::vector<std::int64_t>& table_rows,
                      int num_dense) {
  const std::string file = info.files.empty() ? std::string("?") : info.files.front();
  auto differs = [&](const std::string& field, const std::string& found, const std::string& expected) {
    throw DataError(fmt::format("{} file '{}': {} is {}; the model was built for {}", role, file, field, found, expected));
  };
  if (info.num_dense != num_dense)
    differs("the dense feature count", std::to_string(info.num_dense), std::to_string(num_dense));
  if (info.table_rows.size() != table_rows.size())
    differs("the table count", fmt::format("{} (rows [{}])", info.table_rows.size(), fmt::join(info.table_rows, ", ")),
            fmt::format("{} (rows [{}])", table_rows.size(), fmt::join(table_rows, ", ")));
  for (std::size_t t = 0; t < table_rows.size(); ++t)
    if (info.table_rows[t] != table_rows[t])
      differs(fmt::format("table {}'s row count", t), std::to_string(info.table_rows[t]), std::to_string(table_rows[t]));
}

void check_inputs(const JobSpec& spec, const std::vector<std::int64_t>& table_rows, int num_dense,
                  std::int64_t train_rows) {
  // Each file on its own, so that the message names the one that differs.
  auto check = [&](const std::string& role, const std::string& path) {
    data::DatasetInfo info;
    try {
      info = data::open_file_info(path);
    } catch (const IoError& e) {
      throw IoError(fmt::format("data.{}: {}", role, e.what()));
    }
    check_file_shape(role, info, table_rows, num_dense);
  };
  for (const auto& path : spec.data.train) check("train", path);
  for (const auto& path : spec.data.eval) check("eval", path);
  if (spec.train.batch_size > train_rows)
    throw ConfigError(fmt::format("'train.batch_size' = {} is more than the {} rows of the training data ({}): not one "
                                  "global batch fits",
                                  spec.train.batch_size, train_rows, fmt::join(spec.data.train, ", ")));
}

}  // namespace recmix::runtime
