#include "sched/job_spec.hpp"

#include <string>

#include "core/error.hpp"
#include "core/mlperf_dcnv2.hpp"

namespace recmix::sched {

GemmMath parse_gemm_math(std::string_view name) {
  if (name == "fp32") return GemmMath::fp32;
  if (name == "tf32") return GemmMath::tf32;
  if (name == "bf16") return GemmMath::bf16;
  throw ConfigError("GEMM math '" + std::string(name) + "' is not one of fp32, tf32, bf16");
}

int DlrmShape::interaction_width() const {
  const int f = static_cast<int>(tables.size()) + 1;
  if (concat_interaction || cross_layers > 0) return f * embedding_dim();
  return embedding_dim() + f * (f - 1) / 2;
}

std::int64_t DlrmShape::embedding_params() const {
  std::int64_t n = 0;
  for (const auto& t : tables) n += t.rows * t.dim;
  return n;
}

namespace {
std::int64_t mlp_params(const std::vector<int>& widths, int input) {
  std::int64_t n = 0;
  int in = input;
  for (int w : widths) {
    n += static_cast<std::int64_t>(in) * w + w;
    in = w;
  }
  return n;
}
}  // namespace

std::int64_t DlrmShape::cross_params() const {
  const std::int64_t n = interaction_width(), r = cross_rank;
  return cross_layers * ((r > 0 ? 2 * r * n : n * n) + n);
}

double DlrmShape::cross_macs() const {
  const double n = interaction_width(), r = cross_rank;
  return cross_layers * (r > 0 ? 2 * r * n : n * n);
}

std::int64_t DlrmShape::dense_params() const {
  const std::int64_t cross = cross_params();
  if (bottom_mlp.size() < 2) return mlp_params(top_mlp, interaction_width()) + cross;
  const std::vector<int> bottom_layers(bottom_mlp.begin() + 1, bottom_mlp.end());
  return mlp_params(bottom_layers, bottom_mlp.front()) + mlp_params(top_mlp, interaction_width()) + cross;
}

void validate(const JobSpec& spec) {
  const std::string where = "job '" + spec.name + "': ";
  RECMIX_REQUIRE(!spec.shape.tables.empty(), ConfigError, where + "tables: at least one table is needed");
  for (std::size_t i = 0; i < spec.shape.tables.size(); ++i) {
    const auto& t = spec.shape.tables[i];
    RECMIX_REQUIRE(t.rows > 0 && t.dim > 0, ConfigError,
                   where + "tables[" + std::to_string(i) + "]: rows and dim must be positive");
    RECMIX_REQUIRE(t.dim == spec.shape.tables.front().dim, ConfigError,
                   where + "tables[" + std::to_string(i) + "]: all tables need the same dim (dot interaction)");
  }
  RECMIX_REQUIRE(spec.table_bytes == 2 || spec.table_bytes == 4, ConfigError,
                 where + "table_bytes: must be 4 (fp32) or 2 (fp16, bf16), got " + std::to_string(spec.table_bytes));
  RECMIX_REQUIRE(spec.shape.bottom_mlp.size() >= 2, ConfigError, where + "bottom_mlp: needs input and output widths");
  RECMIX_REQUIRE(spec.shape.bottom_mlp.back() == spec.shape.embedding_dim(), ConfigError,
                 where + "bottom_mlp: last width must equal the embedding dim");
  RECMIX_REQUIRE(!spec.shape.top_mlp.empty(), ConfigError, where + "top_mlp: needs at least one layer");
  for (int w : spec.shape.bottom_mlp) RECMIX_REQUIRE(w > 0, ConfigError, where + "bottom_mlp: widths must be positive");
  for (int w : spec.shape.top_mlp) RECMIX_REQUIRE(w > 0, ConfigError, where + "top_mlp: widths must be positive");
  RECMIX_REQUIRE(spec.shape.pooling > 0, ConfigError, where + "pooling must be positive");
  RECMIX_REQUIRE(spec.global_batch > 0, ConfigError, where + "batch must be positive");
  RECMIX_REQUIRE(spec.ranks > 0, ConfigError, where + "ranks must be positive");
  RECMIX_REQUIRE(spec.steps > 0, ConfigError, where + "steps must be positive");
  RECMIX_REQUIRE(spec.tiering.hot_fraction > 0 && spec.tiering.hot_fraction <= 1, ConfigError,
                 where + "tiering.hot_fraction must be in (0, 1]");
  RECMIX_REQUIRE(spec.tiering.hot_hit_rate >= 0 && spec.tiering.hot_hit_rate <= 1, ConfigError,
                 where + "tiering.hot_hit_rate must be in [0, 1]");
  RECMIX_REQUIRE(spec.tiering.device_budget == 0 || spec.tiering.enabled, ConfigError,
                 where + "tiering.device_budget is set but tiering is off");
}

const std::vector<std::string>& dlrm_preset_names() {
  static const std::vector<std::string> names = {"dlrm-small", "dlrm-medium", "dlrm-large", "dlrm-xlarge"};
  return names;
}

const std::vector<std::string>& dlrm_type_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = dlrm_preset_names();
    all.push_back("dlrm-dcnv2");
    return all;
  }();
  return names;
}

JobSpec dlrm_preset(std::string_view name) {
  JobSpec spec;
  spec.name = std::string(name);
  auto tables = [&](std::int64_t rows, int dim) {
    spec.shape.tables.assign(26, TableShape{rows, dim});
  };
  if (name == "dlrm-small") {
    tables(100'000, 16);
    spec.shape.bottom_mlp = {13, 512, 256, 64, 16};
    spec.shape.top_mlp = {512, 256, 1};
    spec.global_batch = 2048;
  } else if (name == "dlrm-medium") {
    tables(1'000'000, 64);
    spec.shape.bottom_mlp = {13, 512, 256, 64};
    spec.shape.top_mlp = {512, 512, 256, 1};
    spec.global_batch = 4096;
  } else if (name == "dlrm-large") {
    tables(10'000'000, 128);
    spec.shape.bottom_mlp = {13, 512, 256, 128};
    spec.shape.top_mlp = {1024, 1024, 512, 256, 1};
    spec.global_batch = 8192;
    spec.tiering = Tiering{true, 0.1, 0.9};
  } else if (name == "dlrm-xlarge") {
    tables(40'000'000, 128);
    spec.shape.bottom_mlp = {13, 512, 256, 128};
    spec.shape.top_mlp = {1024, 1024, 512, 256, 1};
    spec.global_batch = 16384;
    spec.tiering = Tiering{true, 0.05, 0.85};
  } else if (name == "dlrm-dcnv2") {
    for (std::int64_t rows : mlperf_dcnv2_table_rows()) spec.shape.tables.push_back({rows, 128});
    spec.shape.bottom_mlp = {13, 512, 256, 128};
    spec.shape.top_mlp = {1024, 1024, 512, 256, 1};
    spec.shape.cross_layers = 3;
    spec.shape.cross_rank = 512;
    // 214 lookups a sample over 26 tables: about 8 a bag (the estimator takes one size for all).
    spec.shape.pooling = 8;
    spec.global_batch = 65536;
    spec.ranks = 8;
    spec.tiering = Tiering{true, 0.05, 0.85};
  } else {
    std::string known;
    for (const auto& n : dlrm_type_names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("unknown DLRM preset '" + std::string(name) + "' (known: " + known + ")");
  }
  return spec;
}

}  // namespace recmix::sched
