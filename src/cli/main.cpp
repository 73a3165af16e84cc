// kdsl: the command line. See docs/cli.md.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>
#include <new>
#include <regex>
#include <string>
#include <vector>

#include "cli.h"
#include "dsl/diagnostics.h"
#include "src/log.h"

namespace {

using kdsl::cli::Command;

// -v and -q override KDSL_LOG_LEVEL (src/log.h). KDSL_DEBUG logs the IR and schedule at info
// level, so it implies -v. -vvv sets spdlog's trace level, but kdsl logs nothing at that level:
// it prints what -vv does (the help says so).
void setup_logging(int verbose, bool quiet) {
  spdlog::logger& l = kdsl::log();
  if (kdsl::debug_enabled() && !l.should_log(spdlog::level::info)) {
    l.set_level(spdlog::level::info);
  }
  if (verbose == 1) l.set_level(spdlog::level::info);
  if (verbose == 2) l.set_level(spdlog::level::debug);
  if (verbose >= 3) l.set_level(spdlog::level::trace);
  if (quiet) l.set_level(spdlog::level::err);
}

// The deepest subcommand parsed (`app` when none), and its name: "kdsl cache prune".
const CLI::App* deepest(const CLI::App& app, std::string* name) {
  *name = "kdsl";
  const CLI::App* at = &app;
  while (true) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->parsed() && !sub->get_name().empty()) next = sub;  // not option groups
    }
    if (!next) return at;
    *name += " " + next->get_name();
    at = next;
  }
}

std::string command_name(const CLI::App& app) {
  std::string name;
  deepest(app, &name);
  return name;
}

// An exception's message as printed: what it echoes from the user (a file name, an argument, a
// variable) cannot drive the terminal.
std::string safe(const std::exception& e) {
  return kdsl::terminal_safe(e.what());
}

// CLI11's messages for values it rejected, in kdsl's words: the option, what was given, what it
// takes. An unknown argument is named before a missing required one (CLI11 checks requirements
// first, so `kdsl run FILE --foo` said "--kernel is required").
std::string plain_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  static const std::regex range(R"(^(\S+): Value (.*) not in range (\S+) to (\S+)$)");
  static const std::regex repeated(R"(^(\S+): At Most 1 required but received (\d+)$)");
  static const std::regex member(R"(^(\S+): (.*) not in \{(.*)\}$)");
  static const std::regex one_of(R"(^Requires at most 1 options be given from \[(.*)\]$)");
  std::smatch m;
  if (std::regex_match(what, m, range)) {
    // A real-valued range (--warmup-ms) comes as 0.000000 to 10000.000000: printed as 0 to 10000.
    static const std::regex zeros(R"(\.?0+$)");
    const bool real = m[3].str().find('.') != std::string::npos;
    auto bound = [&](const std::string& b) { return real ? std::regex_replace(b, zeros, "") : b; };
    return fmt::format("{}: '{}' is not a {} from {} to {}", m[1].str(), m[2].str(),
                       real ? "number" : "whole number", bound(m[3].str()), bound(m[4].str()));
  }
  if (std::regex_match(what, m, repeated)) {
    return fmt::format("{} is given {} times; it takes one value", m[1].str(), m[2].str());
  }
  if (std::regex_match(what, m, one_of)) {
    return fmt::format("give at most one of {}",
                       std::regex_replace(m[1].str(), std::regex(","), ", "));
  }
  if (std::regex_match(what, m, member)) {
    return fmt::format("{}: '{}' is not one of {}", m[1].str(), m[2].str(),
                       std::regex_replace(m[3].str(), std::regex(","), ", "));
  }
  // (A missing command keeps CLI11's text: usage_error names the unknown command and the list.)
  if ((dynamic_cast<const CLI::RequiredError*>(&e) && what != "A subcommand is required") ||
      dynamic_cast<const CLI::ExtrasError*>(&e)) {
    const std::vector<std::string> extra = app.remaining(true);
    if (!extra.empty()) {
      std::string list;
      for (const std::string& a : extra) list += fmt::format("{}'{}'", list.empty() ? "" : ", ", a);
      return fmt::format("unexpected argument{} {}", extra.size() > 1 ? "s" : "", list);
    }
  }
  if (what == "file is required") return "a .kdsl file is required";
  if (what == "files is required") return "at least one .kdsl file is required";
  return what;
}

// One line for a command line CLI11 could not parse.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  std::string name;
  const CLI::App* at = deepest(app, &name);
  std::string what = plain_parse_error(app, e);
  if (what == "A subcommand is required") {
    std::string subs;
    for (const CLI::App* sub :
         at->get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); })) {
      subs += (subs.empty() ? "" : ", ") + sub->get_name();
    }
    // The word after the last command name, when there is one, is an unknown command.
    std::vector<std::string> chain;
    for (const CLI::App* a = at; a != &app; a = a->get_parent())
      chain.insert(chain.begin(), a->get_name());
    int i = 1;
    for (const std::string& n : chain) {
      while (i < argc && argv[i] != n) ++i;
      ++i;
    }
    while (i < argc && argv[i][0] == '-') ++i;
    what = i < argc && argv[i][0] != '-'
               ? std::string("unknown command '") + argv[i] + "' (commands: " + subs + ")"
               : "a command is required (" + subs + ")";
  }
  std::cerr << name << ": usage error: " << kdsl::terminal_safe(what) << " (see " << name
            << " --help)\n";
  return kdsl::cli::kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kdsl: GPU normalization and scan kernels from .kdsl files (docs/cli.md)", "kdsl"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kdsl ") + KDSL_VERSION);
  int verbose = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose,
               "More logging on stderr: -v compile and cache decisions with times, -vv debug "
               "(NVRTC warnings too), -vvv the same as -vv (kdsl logs nothing at trace level)");
  app.add_flag("-q,--quiet", quiet, "Only errors");
  app.footer(
      "`kdsl COMMAND --help` shows each command's options and an example; docs/cli.md is the "
      "reference.\n"
      "Exit codes: 0 ok, 1 user error, 2 usage error, 3 verification failed, 4 no GPU.\n"
      "Environment: KDSL_CACHE_DIR, KDSL_CACHE, KDSL_CACHE_MAX_SIZE, KDSL_LOG_LEVEL, KDSL_DEBUG, "
      "KDSL_MATH, KDSL_SCAN_SCHEDULE.\n"
      "Example: kdsl run stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape M=1024,N=8192 "
      "--verify --bench");
  std::vector<Command> commands = {kdsl::cli::register_check(app), kdsl::cli::register_list(app),
                                   kdsl::cli::register_emit(app),  kdsl::cli::register_compile(app),
                                   kdsl::cli::register_run(app),   kdsl::cli::register_bench(app),
                                   kdsl::cli::register_tune(app),  kdsl::cli::register_cache(app)};
  for (const Command& c : commands) c.app->fallthrough();  // -v / -q after the command name
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e, argc, argv);
  }
  setup_logging(verbose, quiet);
  const std::string name = command_name(app);
  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return kdsl::cli::kUsage;
  } catch (const kdsl::cli::UsageError& e) {
    std::cerr << name << ": usage error: " << safe(e) << "\n";
    return kdsl::cli::kUsage;
  } catch (const kdsl::ScheduleHintError& e) {  // a --schedule hint that cannot apply
    std::cerr << name << ": usage error: --schedule: " << safe(e) << "\n";
    return kdsl::cli::kUsage;
  } catch (const kdsl::cli::NoGpuError& e) {
    std::cerr << "kdsl: " << safe(e) << "\n";
    return kdsl::cli::kNoGpu;
  } catch (const kdsl::SourceError& e) {
    // A rendered diagnostic (FILE:LINE:COL: error: ..., the line, a caret) as it is; a source
    // error without a location as any other error.
    const std::string text = safe(e);
    std::string msg = kdsl::cli::error_prefix(text) + text;
    if (msg.back() != '\n') msg += '\n';
    std::cerr << msg;
    return kdsl::cli::kUserError;
  } catch (const kdsl::InternalError& e) {
    std::cerr << "kdsl: internal error (a bug in kdsl; please report it): " << safe(e) << "\n";
    return kdsl::cli::kUserError;
  } catch (const kdsl::Error& e) {
    std::cerr << "kdsl: error: " << safe(e) << "\n";
    return kdsl::cli::kUserError;
  } catch (const std::bad_alloc&) {
    std::cerr << "kdsl: error: out of memory\n";
    return kdsl::cli::kUserError;
  } catch (const std::exception& e) {
    std::cerr << "kdsl: internal error (a bug in kdsl; please report it): " << safe(e) << "\n";
    return kdsl::cli::kUserError;
  }
}
