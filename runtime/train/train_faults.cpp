#include "runtime/train/train_faults.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace recmix::runtime {
namespace {

template <class T>
bool parse_number(std::string_view s, T& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// "<name>:<x>:<y>" split at its last two colons (the name may hold colons itself); nullopt when
// there are not two, or the name is empty.
struct Fields {
  std::string_view name, x, y;
};
std::optional<Fields> last_two_fields(std::string_view text) {
  const auto a = text.rfind(':');
  const auto b = a == std::string_view::npos || a == 0 ? std::string_view::npos : text.rfind(':', a - 1);
  if (b == std::string_view::npos || b == 0) return std::nullopt;
  return Fields{text.substr(0, b), text.substr(b + 1, a - b - 1), text.substr(a + 1)};
}

}  // namespace

TrainFaults TrainFaults::parse(std::string_view text, std::string_view job, int rank) {
  const auto bad = [&](std::string_view why) {
    return ConfigError(fmt::format("RECMIX_FAULT_INJECTION='{}': {} (expected <job>:<step>:<rank>[:after|mid|"
                                   "checkpoint|nan|stall])", text, why));
  };
  TrainFaults f;
  std::string_view rest = text;
  using namespace std::string_view_literals;
  for (const auto& [suffix, where] : {std::pair{":mid"sv, Where::mid}, std::pair{":checkpoint"sv, Where::checkpoint},
                                      std::pair{":nan"sv, Where::nan}, std::pair{":stall"sv, Where::stall},
                                      std::pair{":after"sv, Where::after}})
    if (rest.size() > suffix.size() && rest.ends_with(suffix)) {
      f.where = where;
      rest.remove_suffix(suffix.size());
      break;
    }
  // The job's name may itself hold colons: the step and the rank are the last two fields.
  const auto fields = last_two_fields(rest);
  if (!fields) throw bad("not <job>:<step>:<rank>");
  std::int64_t step = 0;
  int fault_rank = 0;
  if (!parse_number(fields->x, step) || step < 1) throw bad("the step is not a whole number >= 1");
  if (!parse_number(fields->y, fault_rank) || fault_rank < 0)
    throw bad("the rank is not a whole number >= 0 (or the place is not one of after, mid, checkpoint, nan, stall)");
  if (fields->name != job || fault_rank != rank) return TrainFaults{};
  f.step = step;
  return f;
}

double TrainFaults::parse_step_delay(std::string_view text, std::string_view job, int rank) {
  const auto bad = [&](std::string_view why) {
    return ConfigError(fmt::format("RECMIX_STEP_DELAY_INJECTION='{}': {} (expected <job>:<rank>:<seconds>, "
                                   "'*' for every job or rank)", text, why));
  };
  // The job's name may itself hold colons: the rank and the seconds are the last two fields.
  const auto fields = last_two_fields(text);
  if (!fields) throw bad("not <job>:<rank>:<seconds>");
  double seconds = 0;
  if (!parse_number(fields->y, seconds) || !(seconds >= 0 && seconds <= 10))
    throw bad("the seconds are not a number from 0 to 10");
  const std::string_view rank_text = fields->x, name = fields->name;
  int delay_rank = 0;
  if (rank_text != "*" && (!parse_number(rank_text, delay_rank) || delay_rank < 0))
    throw bad("the rank is not a whole number >= 0 or '*'");
  const bool mine = (name == "*" || name == job) && (rank_text == "*" || delay_rank == rank);
  return mine ? seconds : 0;
}

TrainFaults TrainFaults::from_environment(std::string_view job, int rank) {
  const char* text = std::getenv("RECMIX_FAULT_INJECTION");
  TrainFaults f = text == nullptr || *text == '\0' ? TrainFaults{} : parse(text, job, rank);
  if (const char* delay = std::getenv("RECMIX_STEP_DELAY_INJECTION"); delay != nullptr && *delay != '\0')
    f.step_delay_s = parse_step_delay(delay, job, rank);
  return f;
}

}  // namespace recmix::runtime
