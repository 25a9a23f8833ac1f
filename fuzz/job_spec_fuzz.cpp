// Fuzz target for the job-spec parser (runtime/train/job_spec.hpp): the input is TOML text. A spec is
// either parsed or refused with a recmix::Error (a ConfigError naming the key); anything else (a
// crash, a sanitizer report, another exception such as std::out_of_range) is a finding. A spec
// that parses must hold what the parser promises (docs/job-spec.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <toml++/toml.h>

#include "core/error.hpp"
#include "runtime/train/job_spec.hpp"

namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "job spec fuzz: %s\n", what);
    std::abort();
  }
}

// Every integer of the list [model] key in the TOML text is in the parsed list, unchanged (no
// value wrapped into range by a narrowing conversion).
template <class Int>
void require_same_list(const toml::table& root, const char* key, const std::vector<Int>& parsed) {
  const toml::array* list = root["model"][key].as_array();
  if (!list) return;
  require(list->size() == parsed.size(), "a list changed length");
  for (std::size_t i = 0; i < list->size(); ++i)
    require(list->get(i)->value<std::int64_t>() == static_cast<std::int64_t>(parsed[i]), "a list value changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  recmix::runtime::JobSpec spec;
  try {
    spec = recmix::runtime::parse_job_spec(text, "fuzz.toml", "/base");
  } catch (const recmix::Error&) {
    return 0;
  }
  require(!spec.name.empty() && spec.name.find('/') == std::string::npos, "bad name accepted");
  require(!spec.data.train.empty(), "no training data accepted");
  require(spec.model.embedding_dim >= 1, "embedding_dim below 1");
  require(!spec.model.bottom_mlp.empty() && spec.model.bottom_mlp.back() == spec.model.embedding_dim,
          "bottom_mlp does not end in embedding_dim");
  require(!spec.model.top_mlp.empty() && spec.model.top_mlp.back() == 1, "top_mlp does not end in 1");
  for (int w : spec.model.bottom_mlp) require(w >= 1, "bottom_mlp layer below 1");
  for (int w : spec.model.top_mlp) require(w >= 1, "top_mlp layer below 1");
  for (auto r : spec.model.table_rows) require(r >= 1, "table without rows");
  require(spec.train.batch_size >= 1, "batch_size below 1");
  require(spec.device.threads >= 1, "threads below 1");
  require(spec.checkpoint.keep >= 1, "keep below 1");
  require(!spec.run_dir.empty() && !spec.checkpoint.dir.empty(), "empty run or checkpoint folder");
  require(spec.source_text == text, "source text not kept");
  const toml::table root = toml::parse(std::string_view(text), std::string_view("fuzz.toml"));
  require_same_list(root, "tables", spec.model.table_rows);
  require_same_list(root, "bottom_mlp", spec.model.bottom_mlp);
  require_same_list(root, "top_mlp", spec.model.top_mlp);
  // The byte-size parser on the raw text too: a size or a ConfigError.
  try {
    (void)recmix::runtime::parse_byte_size(text, "fuzz");
  } catch (const recmix::Error&) {
  }
  return 0;
}
