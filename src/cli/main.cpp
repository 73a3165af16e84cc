// kdsl: the command line. See docs/cli.md.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli.h"
#include "src/log.h"

namespace {

// -v and -q override KDSL_LOG_LEVEL (src/log.h).
void setup_logging(int verbose, bool quiet) {
  spdlog::logger& l = kdsl::log();
  if (verbose == 1) l.set_level(spdlog::level::info);
  if (verbose >= 2) l.set_level(spdlog::level::debug);
  if (quiet) l.set_level(spdlog::level::err);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kdsl: GPU normalization and scan kernels from .kdsl files (docs/cli.md)", "kdsl"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kdsl ") + KDSL_VERSION);
  int verbose = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose, "More logging (-v: compile and cache decisions with times)");
  app.add_flag("-q,--quiet", quiet, "Only errors");
  app.footer(
      "Exit codes: 0 ok, 1 user error, 2 usage error, 3 verification failed, 4 no GPU.\n"
      "Example: kdsl run stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape M=1024,N=8192 "
      "--verify --bench");
  std::vector<kdsl::cli::Command> commands = {
      kdsl::cli::register_check(app), kdsl::cli::register_list(app),
      kdsl::cli::register_emit(app), kdsl::cli::register_compile(app),
      kdsl::cli::register_run(app), kdsl::cli::register_tune(app)};
  try {
    app.parse(argc, argv);
    setup_logging(verbose, quiet);
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return kdsl::cli::kUsage;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kdsl: usage error: " << e.what() << "\n(see kdsl --help)\n";
    return kdsl::cli::kUsage;
  } catch (const kdsl::cli::UsageError& e) {
    std::cerr << "kdsl: usage error: " << e.what() << "\n";
    return kdsl::cli::kUsage;
  } catch (const kdsl::SourceError& e) {
    std::cerr << e.what();
    return kdsl::cli::kUserError;
  } catch (const kdsl::Error& e) {
    std::cerr << "kdsl: error: " << e.what() << "\n";
    return kdsl::cli::kUserError;
  } catch (const std::exception& e) {
    std::cerr << "kdsl: internal error: " << e.what() << "\n";
    return kdsl::cli::kUserError;
  }
}
