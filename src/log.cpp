#include "log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace kdsl {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("kdsl");
    if (!l) l = spdlog::stderr_color_mt("kdsl");
    l->set_pattern("kdsl: %^%l%$: %v");
    const char* env = std::getenv("KDSL_LOG_LEVEL");
    l->set_level(env ? spdlog::level::from_str(env) : spdlog::level::warn);
    return l;
  }();
  return *logger;
}

}  // namespace kdsl
