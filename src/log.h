// kdsl's logger: a spdlog logger named "kdsl" writing to stderr. Its level comes from
// KDSL_LOG_LEVEL (trace, debug, info, warn, error, off and spdlog's other names warning, err and
// critical, in any case, spaces around ignored; default warn; kLevelNames in log.cpp), so an
// application embedding kdsl sees only warnings unless it asks for more. The CLI's -v/-q change
// it.
#pragma once

#include <spdlog/spdlog.h>

namespace kdsl {

/// The process-wide kdsl logger (created on first use; thread-safe).
spdlog::logger& log();

/// KDSL_DEBUG: 1, on, true or yes (any case) logs the IR and the schedule after each compiler
/// stage; unset, empty, 0, off, false or no does not; another value is ignored with a warning.
bool debug_enabled();

}  // namespace kdsl
