#pragma once
// The checks made before a job allocates its model or trains a step: every data file it will
// read (train and eval) opens and has the model's shape, and one global batch fits in the
// training data. Each failure names the file, the field and both values, so that a mistake in the
// eval data is not found hours later, after the last step.
#include <cstdint>
#include <string>
#include <vector>

#include "data/format.hpp"

namespace recmix::runtime {

struct JobSpec;

// Throws DataError when `file` (opened as `info`) differs from the model's shape: "<role> file
// '<path>': <field> is <found>; the model was built for <expected>" (role: train or eval).
void check_file_shape(const std::string& role, const data::DatasetInfo& info, const std::vector<std::int64_t>& table_rows,
                      int num_dense);

// Opens every file of data.train and data.eval (IoError/DataError naming a missing or unreadable
// one) and checks each against the model's shape; the training data's rows must hold one global
// batch (ConfigError naming train.batch_size and the rows).
void check_inputs(const JobSpec& spec, const std::vector<std::int64_t>& table_rows, int num_dense,
                  std::int64_t train_rows);

}  // namespace recmix::runtime
