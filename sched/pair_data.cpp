#include "sched/pair_data.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "sched/csv.hpp"

namespace recmix::sched {

namespace {
std::string lucid_type(const CsvRow& row, const std::string& suffix) {
  return row.text("model" + suffix) + "/" + row.text("dataset" + suffix) + "/b" + row.text("batchsize" + suffix) +
         "/amp" + row.text("amp" + suffix);
}
}  // namespace

PairDataset read_lucid_pairs(const std::string& pairs_csv, const std::string& singles_csv) {
  PairDataset data;
  data.source = "lucid";
  CsvReader singles(singles_csv);
  for (CsvRow row; singles.next(row);) {
    SoloProfile p;
    p.util[Resource::compute] = row.number("gpu_util") / 100.0;
    p.util[Resource::memory_bandwidth] = row.number("gmem_util") / 100.0;
    p.memory_bytes = row.number("gmem") * 1024.0 * 1024.0;
    p.speed = row.number("speed");
    data.solo[lucid_type(row, "")] = p;
  }
  CsvReader pairs(pairs_csv);
  for (CsvRow row; pairs.next(row);) {
    const std::string a = lucid_type(row, "1");
    const std::string b = lucid_type(row, "2");
    const double speed_a = row.number("speed1");
    const double speed_b = row.number("speed2");
    if (speed_a <= 0 || speed_b <= 0) {
      ++data.infeasible_pairs;
      continue;
    }
    data.pairs.push_back({a, b, 1.0 / speed_a});
    data.pairs.push_back({b, a, 1.0 / speed_b});
  }
  return data;
}

nlohmann::json read_gavel_throughputs(const std::string& json_path, std::string_view gpu) {
  std::ifstream in(json_path);
  RECMIX_REQUIRE(in, IoError, "cannot open " + json_path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(json_path + ": not valid JSON: " + e.what());
  }
  RECMIX_REQUIRE(j.contains(std::string(gpu)), DataError,
                 json_path + ": no throughputs for GPU '" + std::string(gpu) + "'");
  return j;
}

PairDataset read_gavel_pairs(const std::string& json_path, std::string_view gpu) {
  const nlohmann::json j = read_gavel_throughputs(json_path, gpu);
  // Keys look like "('ResNet-18 (batch size 32)', 1)"; keep single-GPU types.
  auto parse_key = [&](const std::string& key, std::string& name) {
    const auto open = key.find('\'');
    const auto close = key.rfind('\'');
    if (open == std::string::npos || close <= open) return false;
    name = key.substr(open + 1, close - open - 1);
    return key.substr(close) == "', 1)";
  };
  PairDataset data;
  data.source = "gavel-" + std::string(gpu);
  const auto& table = j.at(std::string(gpu));
  for (const auto& [key, entry] : table.items()) {
    std::string name;
    if (!parse_key(key, name) || !entry.contains("null")) continue;
    data.solo[name].speed = entry.at("null").get<double>();
  }
  for (const auto& [key, entry] : table.items()) {
    std::string name;
    if (!parse_key(key, name) || !data.solo.count(name)) continue;
    const double solo = data.solo[name].speed;
    for (const auto& [other_key, value] : entry.items()) {
      std::string other;
      if (other_key == "null" || !parse_key(other_key, other) || !value.is_array() || value.size() != 2) continue;
      const double tput = value[0].get<double>();
      if (tput <= 0 || solo <= 0) {
        ++data.infeasible_pairs;
        continue;
      }
      data.pairs.push_back({name, other, solo / tput});
    }
  }
  RECMIX_REQUIRE(!data.pairs.empty(), DataError, json_path + ": no single-GPU pair throughputs for " + std::string(gpu));
  return data;
}

}  // namespace recmix::sched
