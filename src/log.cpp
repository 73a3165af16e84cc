#include "log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "text_util.h"

namespace kdsl {
namespace {

// KDSL_LOG_LEVEL: trace, debug, info, warn, error or off (and spdlog's other names, warning, err,
// critical), in any case, spaces around ignored, as KDSL_CACHE and KDSL_MATH are read. Empty or
// blank is unset (warn); another value is nullopt.
std::optional<spdlog::level::level_enum> level_from_env(const std::string& text) {
  const std::string word = env_word(text);
  if (word.empty()) return spdlog::level::warn;
  // from_str gives `off` for any unknown name.
  const spdlog::level::level_enum level = spdlog::level::from_str(word);
  if (level == spdlog::level::off && word != "off") return std::nullopt;
  return level;
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
      l->warn("ignoring KDSL_LOG_LEVEL='{}': expected trace, debug, info, warn, error or off", env);
    }
    return l;
  }();
  return *logger;
}

}  // namespace kdsl
