#include "log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace kdsl {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("kdsl");
    if (!l) l = spdlog::stderr_color_mt("kdsl");
    l->set_pattern("kdsl: %^%l%$: %v");
    const char* env = std::getenv("KDSL_LOG_LEVEL");
    // from_str gives `off` for any unknown name: keep warn then, and say so.
    spdlog::level::level_enum level = env ? spdlog::level::from_str(env) : spdlog::level::warn;
    bool unknown = env && level == spdlog::level::off && std::string(env) != "off";
    l->set_level(unknown ? spdlog::level::warn : level);
    if (unknown) {
      l->warn("ignoring KDSL_LOG_LEVEL='{}': expected trace, debug, info, warn, error or off", env);
    }
    return l;
  }();
  return *logger;
}

}  // namespace kdsl
