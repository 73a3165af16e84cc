#include "log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>

#include "text_util.h"

namespace kdsl {
namespace {

// The names KDSL_LOG_LEVEL takes, the one list of them: spdlog's level names and the short forms
// warn and err that spdlog::level::from_str also reads. The warning for another value lists them
// in this order.
struct LevelName {
  const char* name;
  spdlog::level::level_enum level;
};
constexpr LevelName kLevelNames[] = {
    {"trace", spdlog::level::trace},  {"debug", spdlog::level::debug},
    {"info", spdlog::level::info},    {"warn", spdlog::level::warn},
    {"warning", spdlog::level::warn}, {"error", spdlog::level::err},
    {"err", spdlog::level::err},      {"critical", spdlog::level::critical},
    {"off", spdlog::level::off},
};

// "trace, debug, ... or off": every name of kLevelNames.
std::string level_names() {
  std::string out;
  for (const LevelName& n : kLevelNames) {
    if (!out.empty()) out += &n == &kLevelNames[std::size(kLevelNames) - 1] ? " or " : ", ";
    out += n.name;
  }
  return out;
}

// KDSL_LOG_LEVEL: a name of kLevelNames in any case, spaces around ignored, as KDSL_CACHE and
// KDSL_MATH are read. Empty or blank is unset (warn); another value is nullopt.
std::optional<spdlog::level::level_enum> level_from_env(const std::string& text) {
  const std::string word = env_word(text);
  if (word.empty()) return spdlog::level::warn;
  for (const LevelName& n : kLevelNames) {
    if (word == n.name) return n.level;
  }
  return std::nullopt;
}

}  // namespace

bool debug_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("KDSL_DEBUG");
    const std::string word = env_word(env ? env : "");
    if (word.empty() || word == "0" || word == "off" || word == "false" || word == "no") {
      return false;
    }
    if (word == "1" || word == "on" || word == "true" || word == "yes") return true;
    log().warn(
        "ignoring KDSL_DEBUG='{}': expected 1, on, true or yes (on), or 0, off, false or no (off)",
        env);
    return false;
  }();
  return on;
}

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("kdsl");
    if (!l) l = spdlog::stderr_color_mt("kdsl");
    l->set_pattern("kdsl: %^%l%$: %v");
    const char* env = std::getenv("KDSL_LOG_LEVEL");
    const auto level = level_from_env(env ? env : "");
    l->set_level(level.value_or(spdlog::level::warn));
    if (!level) {
      l->warn("ignoring KDSL_LOG_LEVEL='{}': expected {}", env, level_names());
    }
    return l;
  }();
  return *logger;
}

}  // namespace kdsl
