#include "runtime/train/job_spec.hpp"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <utility>
#include <toml++/toml.h>

#include "core/error.hpp"

namespace recmix::runtime {
namespace {

template <class Choice>
using ChoiceTable = std::span<const std::pair<std::string_view, Choice>>;

// Each choice's spellings, in the order an error lists them.
template <class Choice>
ChoiceTable<Choice> choices();
template <>
ChoiceTable<mlp::InteractionKind> choices<mlp::InteractionKind>() {
  static constexpr std::pair<std::string_view, mlp::InteractionKind> kTable[] = {
      {"dot", mlp::InteractionKind::dot}, {"cat", mlp::InteractionKind::cat}, {"dcn", mlp::InteractionKind::dcn}};
  return kTable;
}
template <>
ChoiceTable<embedding::Pooling> choices<embedding::Pooling>() {
  static constexpr std::pair<std::string_view, embedding::Pooling> kTable[] = {
      {"sum", embedding::Pooling::sum}, {"mean", embedding::Pooling::mean}};
  return kTable;
}
template <>
ChoiceTable<DenseOptimizerKind> choices<DenseOptimizerKind>() {
  static constexpr std::pair<std::string_view, DenseOptimizerKind> kTable[] = {
      {"sgd", DenseOptimizerKind::sgd}, {"adagrad", DenseOptimizerKind::adagrad}, {"adam", DenseOptimizerKind::adam}};
  return kTable;
}
template <>
ChoiceTable<SparseOptimizerKind> choices<SparseOptimizerKind>() {
  static constexpr std::pair<std::string_view, SparseOptimizerKind> kTable[] = {
      {"sgd", SparseOptimizerKind::sgd}, {"adagrad", SparseOptimizerKind::adagrad},
      {"rowwise_adagrad", SparseOptimizerKind::rowwise_adagrad}};
  return kTable;
}
template <>
ChoiceTable<WhenBusy> choices<WhenBusy>() {
  static constexpr std::pair<std::string_view, WhenBusy> kTable[] = {
      {"wait", WhenBusy::wait}, {"skip", WhenBusy::skip}};
  return kTable;
}
template <>
ChoiceTable<device::BackendKind> choices<device::BackendKind>() {
  static constexpr std::pair<std::string_view, device::BackendKind> kTable[] = {
      {"cpu", device::BackendKind::cpu}, {"cuda", device::BackendKind::cuda},
      {"cpu-strict", device::BackendKind::cpu_strict}};
  return kTable;
}
template <>
ChoiceTable<DenseReplicas> choices<DenseReplicas>() {
  static constexpr std::pair<std::string_view, DenseReplicas> kTable[] = {
      {"auto", DenseReplicas::automatic}, {"on", DenseReplicas::on}, {"off", DenseReplicas::off}};
  return kTable;
}
template <>
ChoiceTable<device::CpuGemm> choices<device::CpuGemm>() {
  static constexpr std::pair<std::string_view, device::CpuGemm> kTable[] = {
      {"auto", device::CpuGemm::automatic}, {"openblas", device::CpuGemm::openblas},
      {"onednn", device::CpuGemm::onednn}};
  return kTable;
}
template <>
ChoiceTable<AutoSwitch> choices<AutoSwitch>() {
  static constexpr std::pair<std::string_view, AutoSwitch> kTable[] = {
      {"true", AutoSwitch::on}, {"false", AutoSwitch::off}, {"auto", AutoSwitch::automatic}};
  return kTable;
}
template <>
ChoiceTable<embedding::HotSet> choices<embedding::HotSet>() {
  static constexpr std::pair<std::string_view, embedding::HotSet> kTable[] = {
      {"counts", embedding::HotSet::counts}, {"lfu", embedding::HotSet::lfu}};
  return kTable;
}
template <>
ChoiceTable<embedding::ColdUpdate> choices<embedding::ColdUpdate>() {
  static constexpr std::pair<std::string_view, embedding::ColdUpdate> kTable[] = {
      {"device", embedding::ColdUpdate::device}, {"host", embedding::ColdUpdate::host}};
  return kTable;
}
template <>
ChoiceTable<DensePrecision> choices<DensePrecision>() {
  static constexpr std::pair<std::string_view, DensePrecision> kTable[] = {
      {"fp32", DensePrecision::fp32}, {"tf32", DensePrecision::tf32}, {"bf16", DensePrecision::bf16},
      {"auto", DensePrecision::automatic}};
  return kTable;
}
template <>
ChoiceTable<half::Storage> choices<half::Storage>() {
  static constexpr std::pair<std::string_view, half::Storage> kTable[] = {
      {"fp32", half::Storage::fp32}, {"fp16", half::Storage::fp16}, {"bf16", half::Storage::bf16}};
  return kTable;
}
template <>
ChoiceTable<Rounding> choices<Rounding>() {
  static constexpr std::pair<std::string_view, Rounding> kTable[] = {
      {"stochastic", Rounding::stochastic}, {"nearest", Rounding::nearest}};
  return kTable;
}

// The choice spelled `text`, or nothing; `allowed` is set to the spellings for the error.
template <class Choice>
std::optional<Choice> find_choice(std::string_view text, std::string& allowed) {
  for (const auto& [name, value] : choices<Choice>()) {
    if (name == text) return value;
    allowed += (allowed.empty() ? "" : ", ") + std::string(name);
  }
  return std::nullopt;
}

// Reads values from one TOML table, remembering which keys were used so that the rest can be
// reported as unknown.
class Section {
 public:
  Section(const toml::table* table, std::string path, std::string origin)
      : table_(table), path_(std::move(path)), origin_(std::move(origin)) {}

  std::string key_name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(fmt::format("{}: '{}' {}", origin_, key_name(key), what));
  }

  const toml::node* find(const std::string& key) {
    used_.insert(key);
    return table_ ? table_->get(key) : nullptr;
  }

  void read(const std::string& key, std::string& out) {
    if (auto* n = find(key)) {
      auto v = n->value<std::string>();
      if (!v || !n->is_string()) fail(key, "must be a string");
      out = *v;
    }
  }
  void read(const std::string& key, bool& out) {
    if (auto* n = find(key)) {
      if (!n->is_boolean()) fail(key, "must be true or false");
      out = *n->value<bool>();
    }
  }
  // true, false or the string "auto".
  void read_switch(const std::string& key, AutoSwitch& out) {
    if (auto* n = find(key)) {
      if (n->is_boolean())
        out = *n->value<bool>() ? AutoSwitch::on : AutoSwitch::off;
      else if (n->is_string() && *n->value<std::string>() == "auto")
        out = AutoSwitch::automatic;
      else
        fail(key, "must be true, false or \"auto\"");
    }
  }
  template <class Int>
    requires std::is_integral_v<Int>
  void read_int(const std::string& key, Int& out, std::int64_t lo, std::int64_t hi) {
    if (auto* n = find(key)) {
      if (!n->is_integer()) fail(key, "must be an integer");
      std::int64_t v = *n->value<std::int64_t>();
      if (v < lo || v > hi) fail(key, fmt::format("must be between {} and {} (got {})", lo, hi, v));
      out = static_cast<Int>(v);
    }
  }
  void read_float(const std::string& key, float& out, double lo, double hi) {
    double d = out;
    read_double(key, d, lo, hi);
    out = static_cast<float>(d);
  }
  void read_double(const std::string& key, double& out, double lo, double hi) {
    if (auto* n = find(key)) {
      if (!n->is_number()) fail(key, "must be a number");
      double v = *n->value<double>();
      if (!(v >= lo && v <= hi)) fail(key, fmt::format("must be between {} and {} (got {})", lo, hi, v));
      out = v;
    }
  }
  void read_bytes(const std::string& key, std::uint64_t& out) {
    if (auto* n = find(key)) {
      if (n->is_integer()) {
        std::int64_t v = *n->value<std::int64_t>();
        if (v < 0) fail(key, "must not be negative");
        out = static_cast<std::uint64_t>(v);
      } else if (n->is_string()) {
        out = parse_byte_size(*n->value<std::string>(), key_name(key));
      } else {
        fail(key, "must be a byte count such as 4294967296 or \"4GiB\"");
      }
    }
  }
  template <class Int>
  void read_int_list(const std::string& key, std::vector<Int>& out, std::int64_t lo) {
    if (auto* n = find(key)) {
      auto* arr = n->as_array();
      if (!arr) fail(key, "must be a list of integers");
      out.clear();
      for (std::size_t i = 0; i < arr->size(); ++i) {
        auto* e = arr->get(i);
        if (!e->is_integer()) fail(key, fmt::format("element {} must be an integer", i));
        std::int64_t v = *e->value<std::int64_t>();
        if (v < lo) fail(key, fmt::format("element {} must be at least {} (got {})", i, lo, v));
        if (v > std::numeric_limits<Int>::max())
          fail(key, fmt::format("element {} must be at most {} (got {})", i, std::numeric_limits<Int>::max(), v));
        out.push_back(static_cast<Int>(v));
      }
    }
  }
  void read_string_list(const std::string& key, std::vector<std::string>& out) {
    if (auto* n = find(key)) {
      if (n->is_string()) {
        out = {*n->value<std::string>()};
        return;
      }
      auto* arr = n->as_array();
      if (!arr) fail(key, "must be a file name or a list of file names");
      out.clear();
      for (std::size_t i = 0; i < arr->size(); ++i) {
        auto* e = arr->get(i);
        if (!e->is_string()) fail(key, fmt::format("element {} must be a string", i));
        out.push_back(*e->value<std::string>());
      }
    }
  }
  // A string naming one of the choices (choices<Choice>()).
  template <class Choice>
  void read_choice(const std::string& key, Choice& out) {
    if (!find(key)) return;
    std::string text;
    read(key, text);
    std::string allowed;
    const auto value = find_choice<Choice>(text, allowed);
    if (!value) fail(key, fmt::format("must be one of {} (got \"{}\")", allowed, text));
    out = *value;
  }
  Section sub(const std::string& key) {
    const toml::node* n = find(key);
    if (n && !n->is_table()) fail(key, "must be a table ([" + key_name(key) + "])");
    return Section(n ? n->as_table() : nullptr, key_name(key), origin_);
  }
  // Every key present but never asked for is an error.
  void reject_unknown() const {
    if (!table_) return;
    for (auto&& [k, v] : *table_) {
      std::string key(k.str());
      if (!used_.count(key))
        throw ConfigError(fmt::format("{}: unknown key '{}'", origin_, key_name(key)));
    }
  }

 private:
  const toml::table* table_;
  std::string path_, origin_;
  std::set<std::string> used_;
};

}  // namespace

template <class Choice>
std::string_view spelling(Choice value) {
  for (const auto& [name, v] : choices<Choice>())
    if (v == value) return name;
  return "?";
}

template <class Choice>
Choice parse_choice(std::string_view text, const std::string& key) {
  std::string allowed;
  const auto value = find_choice<Choice>(text, allowed);
  if (!value) throw ConfigError(fmt::format("'{}' must be one of {} (got \"{}\")", key, allowed, text));
  return *value;
}

#define RECMIX_JOB_SPEC_CHOICE(Choice)                       \
  template std::string_view spelling<Choice>(Choice value); \
  template Choice parse_choice<Choice>(std::string_view text, const std::string& key);
RECMIX_JOB_SPEC_CHOICE(mlp::InteractionKind)
RECMIX_JOB_SPEC_CHOICE(embedding::Pooling)
RECMIX_JOB_SPEC_CHOICE(DenseOptimizerKind)
RECMIX_JOB_SPEC_CHOICE(SparseOptimizerKind)
RECMIX_JOB_SPEC_CHOICE(WhenBusy)
RECMIX_JOB_SPEC_CHOICE(device::BackendKind)
RECMIX_JOB_SPEC_CHOICE(DenseReplicas)
RECMIX_JOB_SPEC_CHOICE(device::CpuGemm)
RECMIX_JOB_SPEC_CHOICE(AutoSwitch)
RECMIX_JOB_SPEC_CHOICE(embedding::HotSet)
RECMIX_JOB_SPEC_CHOICE(embedding::ColdUpdate)
RECMIX_JOB_SPEC_CHOICE(DensePrecision)
RECMIX_JOB_SPEC_CHOICE(half::Storage)
RECMIX_JOB_SPEC_CHOICE(Rounding)
#undef RECMIX_JOB_SPEC_CHOICE

std::string resolve_path(const std::string& path, const std::string& base_dir) {
  if (base_dir.empty() || path.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open {} '{}'", what, path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::uint64_t parse_byte_size(const std::string& text, const std::string& key) {
  // digits with at most one '.', then an optional unit: no sign, exponent, NaN or infinity
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  if (number.empty() || number == "." || number.find('.') != number.rfind('.'))
    throw ConfigError(fmt::format("'{}': \"{}\" is not a byte size (example: \"4GiB\")", key, text));
  const std::string too_large = fmt::format("'{}': \"{}\" is too large (it must be under 16 EiB)", key, text);
  double value = 0;
  try {
    value = std::stod(number);
  } catch (const std::out_of_range&) {
    throw ConfigError(too_large);
  }
  std::string unit = text.substr(i);
  unit.erase(0, unit.find_first_not_of(' '));
  double scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB" || unit == "K") scale = 1024.0;
  else if (unit == "MiB" || unit == "M") scale = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB" || unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "TB") scale = 1e12;
  else throw ConfigError(fmt::format("'{}': unknown unit \"{}\" (use B, KiB, MiB, GiB, TiB, KB, MB, GB)", key, unit));
  const double bytes = value * scale;
  if (!(bytes < 18446744073709551616.0))  // 2^64: the conversion below would not be defined
    throw ConfigError(too_large);
  return static_cast<std::uint64_t>(bytes);
}

namespace {

// [model]: the tables, the MLPs and how they meet.
void read_model(Section& top, ModelSpec& m) {
  auto model = top.sub("model");
  model.read_int_list("tables", m.table_rows, 1);
  model.read_int("embedding_dim", m.embedding_dim, 1, 4096);
  model.read_int_list("bottom_mlp", m.bottom_mlp, 1);
  model.read_int_list("top_mlp", m.top_mlp, 1);
  model.read_choice("interaction", m.interaction);
  model.read_int("cross_layers", m.cross_layers, 1, 64);
  model.read_int("cross_rank", m.cross_rank, 0, 1 << 20);
  for (const char* key : {"cross_layers", "cross_rank"})
    if (model.find(key) && m.interaction != mlp::InteractionKind::dcn)
      model.fail(key, fmt::format("applies to interaction = \"dcn\" only (the interaction is \"{}\")", spelling(m.interaction)));
  model.read_choice("pooling", m.pooling);
  if (m.bottom_mlp.empty()) model.fail("bottom_mlp", "must name at least one layer");
  if (m.bottom_mlp.back() != m.embedding_dim)
    model.fail("bottom_mlp", fmt::format("must end in embedding_dim = {} (the dot interaction stacks it with the embeddings; got {})",
                                         m.embedding_dim, m.bottom_mlp.back()));
  if (m.top_mlp.empty() || m.top_mlp.back() != 1) model.fail("top_mlp", "must end in a layer of width 1 (the click probability)");
  model.reject_unknown();
}

// [embedding]: the hot and cold tiers.
void read_embedding(Section& top, EmbeddingSpec& e) {
  auto emb = top.sub("embedding");
  if (auto* n = emb.find("hot_fraction")) {
    if (!n->is_number()) emb.fail("hot_fraction", "must be a number");
    e.hot_fraction = *n->value<double>();
    if (!(e.hot_fraction > 0 && e.hot_fraction <= 1))
      emb.fail("hot_fraction", fmt::format("must be in (0, 1] (got {})", e.hot_fraction));
  }
  emb.read_bytes("device_budget", e.device_budget);
  if (emb.find("device_budget") && e.device_budget == 0) emb.fail("device_budget", "must be above 0 bytes");
  if (e.hot_fraction > 0 && e.device_budget > 0)
    emb.fail("device_budget", "and 'embedding.hot_fraction' are alternatives: give one of them");
  emb.read_choice("hot_set", e.hot_set);
  emb.read_int("rerank_interval", e.rerank_interval, 0, INT64_MAX);
  emb.read_choice("cold_update", e.cold_update);
  emb.reject_unknown();
}

// [optimizer].
void read_optimizer(Section& top, OptimizerSpec& o) {
  auto opt = top.sub("optimizer");
  opt.read_choice("dense", o.dense);
  opt.read_choice("sparse", o.sparse);
  opt.read_float("lr", o.lr, 1e-12, 1e6);
  opt.read_float("sparse_lr", o.sparse_lr, 1e-12, 1e6);
  opt.read_float("eps", o.eps, 0, 1);
  opt.read_float("initial_accumulator", o.initial_accumulator, 0, 1e6);
  LrSchedule& sc = o.schedule;
  opt.read_int("warmup_steps", sc.warmup_steps, 0, std::int64_t(1) << 40);
  opt.read_int("decay_start", sc.decay_start, 0, std::int64_t(1) << 40);
  opt.read_int("decay_steps", sc.decay_steps, 0, std::int64_t(1) << 40);
  opt.read_double("decay_power", sc.decay_power, 1e-3, 100);
  if (sc.decay_steps > 0 && sc.decay_start < sc.warmup_steps)
    opt.fail("decay_start", fmt::format("must be at least 'optimizer.warmup_steps' = {}: the warm-up ends before the "
                                        "decay starts (got {})",
                                        sc.warmup_steps, sc.decay_start));
  for (const char* key : {"decay_start", "decay_power"})
    if (opt.find(key) && sc.decay_steps == 0) opt.fail(key, "applies only with 'optimizer.decay_steps' > 0");
  opt.reject_unknown();
}

// [data]: the files, resolved against the spec's folder.
void read_data(Section& top, JobSpec& spec, const std::string& origin, const std::string& base_dir) {
  auto data = top.sub("data");
  data.read_string_list("train", spec.data.train);
  data.read_string_list("eval", spec.data.eval);
  data.read("shuffle", spec.data.shuffle);
  data.read_int("shuffle_window", spec.data.shuffle_window, 0, INT64_MAX);
  data.read_int("prefetch", spec.data.prefetch, 0, 64);
  data.reject_unknown();
  if (spec.data.train.empty()) throw ConfigError(origin + ": 'data.train' is required (one HDF5 file or a list)");
  for (auto& f : spec.data.train) f = resolve_path(f, base_dir);
  for (auto& f : spec.data.eval) f = resolve_path(f, base_dir);
}

// [train] (has_eval: data.eval is given).
void read_train(Section& top, TrainSpec& t, bool has_eval) {
  auto train = top.sub("train");
  train.read_int("batch_size", t.batch_size, 1, 1 << 24);
  train.read_int("steps", t.steps, 0, INT64_MAX);
  train.read_int("epochs", t.epochs, 1, 1 << 20);
  train.read_int("eval_interval", t.eval_interval, 0, INT64_MAX);
  train.read_int("eval_batches", t.eval_batches, 0, INT64_MAX);
  train.read_int("eval_per_epoch", t.eval_per_epoch, 1, INT64_MAX);
  if (train.find("eval_per_epoch") && train.find("eval_interval"))
    train.fail("eval_per_epoch", "and 'train.eval_interval' are alternatives: give one of them");
  if (auto* n = train.find("target_auc")) {
    if (!n->is_number()) train.fail("target_auc", "must be a number");
    t.target_auc = *n->value<double>();
    if (!(t.target_auc > 0.5 && t.target_auc <= 1))
      train.fail("target_auc", fmt::format("must be in (0.5, 1] (got {})", t.target_auc));
    if (!has_eval) train.fail("target_auc", "needs evaluation data: 'data.eval' is not given");
  }
  train.read("mllog", t.mllog);
  train.read_double("log_interval_s", t.log_interval_s, 0, 86400);
  train.read_int("log_interval", t.log_interval, 0, INT64_MAX);
  train.reject_unknown();
}

// [checkpoint].
void read_checkpoint(Section& top, JobSpec& spec) {
  auto ckpt = top.sub("checkpoint");
  ckpt.read("dir", spec.checkpoint.dir);
  ckpt.read_int("interval", spec.checkpoint.interval, 0, INT64_MAX);
  ckpt.read_int("keep", spec.checkpoint.keep, 1, 1000);
  ckpt.read("async", spec.checkpoint.async);
  ckpt.read_choice("when_busy", spec.checkpoint.when_busy);
  ckpt.reject_unknown();
}

// [device].
void read_device(Section& top, JobSpec& spec) {
  auto dev = top.sub("device");
  dev.read_choice("kind", spec.device.kind);
  dev.read_int("threads", spec.device.threads, 1, 1024);
  dev.read_choice("dense_replicas", spec.device.dense_replicas);
  dev.read_choice("gemm", spec.device.gemm);
  dev.read_switch("graphs", spec.device.graphs);
  dev.read_switch("l2_window", spec.device.l2_window);
  dev.read_bytes("memory_capacity", spec.device.memory_capacity);
  dev.read_bytes("host_memory_capacity", spec.device.host_memory_capacity);
  dev.reject_unknown();
}

// [precision].
void read_precision(Section& top, PrecisionSpec& pr) {
  auto prec = top.sub("precision");
  prec.read_choice("dense", pr.dense);
  prec.read_choice("embedding", pr.embedding);
  prec.read_choice("rounding", pr.rounding);
  prec.reject_unknown();
}

}  // namespace

JobSpec parse_job_spec(const std::string& toml_text, const std::string& origin, const std::string& base_dir) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw ConfigError(fmt::format("{}:{}:{}: {}", origin, where.line, where.column, e.description()));
  }
  JobSpec spec;
  spec.source_text = toml_text;
  Section top(&root, "", origin);
  top.read("name", spec.name);
  if (spec.name.empty() || spec.name.find('/') != std::string::npos) top.fail("name", "must be a non-empty name without '/'");
  top.read_int("seed", spec.seed, 0, INT64_MAX);
  top.read("run_dir", spec.run_dir);
  top.read("sharding", spec.sharding);

  read_model(top, spec.model);
  read_embedding(top, spec.embedding);
  read_optimizer(top, spec.optimizer);
  read_data(top, spec, origin, base_dir);
  read_train(top, spec.train, !spec.data.eval.empty());
  read_checkpoint(top, spec);
  read_device(top, spec);
  read_precision(top, spec.precision);
  top.reject_unknown();

  if (spec.run_dir.empty()) spec.run_dir = "runs/" + spec.name;
  spec.run_dir = resolve_path(spec.run_dir, base_dir);
  if (spec.checkpoint.dir.empty()) spec.checkpoint.dir = (std::filesystem::path(spec.run_dir) / "checkpoints").string();
  else spec.checkpoint.dir = resolve_path(spec.checkpoint.dir, base_dir);
  return spec;
}

JobSpec load_job_spec(const std::string& path) {
  auto base = std::filesystem::path(path).parent_path().string();
  return parse_job_spec(read_text_file(path, "job spec"), path, base);
}

}  // namespace recmix::runtime
