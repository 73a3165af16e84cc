// kdsl cache stats | list | clear | prune: the disk cache of compiled kernels (docs/cache.md).
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <iostream>

#include "cli.h"
#include "dsl/text.h"
#include "src/cache.h"

namespace kdsl::cli {
namespace {

struct CacheOptions {
  bool json = false;
  std::string max_size;  // prune --max-size
};

std::string limit_text(uint64_t max_bytes) {
  return max_bytes == 0 ? "none" : human_bytes(max_bytes);
}

// Seconds since the epoch of a file time.
int64_t unix_seconds(std::filesystem::file_time_type t) {
  auto sys = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration_cast<std::chrono::seconds>(sys.time_since_epoch()).count();
}

std::string local_time(int64_t seconds) {
  std::time_t tt = static_cast<std::time_t>(seconds);
  std::tm tm{};
  localtime_r(&tt, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", tm);
}

std::string state(const CacheStats& s) {
  if (!s.enabled) return "off (KDSL_CACHE)";
  if (!s.unusable.empty()) return "not usable";
  std::error_code ec;
  const bool exists = std::filesystem::exists(s.dir, ec);
  // What a compile does (found by user testing: "on" where every kernel stayed in memory).
  if (!s.unwritable.empty()) {
    return fmt::format("on, but not writable: {}; {}", s.unwritable,
                       exists ? "entries already there are loaded, newly compiled kernels are "
                                "kept in memory only"
                              : "compiled kernels are kept in memory only");
  }
  // Not created yet: the first compile creates it, so "on" alone would claim more than is known.
  return exists ? "on" : "on (the directory is created by the first compile)";
}

// "kdsl: note: 2 entries in DIR/ab not listed: the cache does not use that folder: REASON", for
// each untrusted shard folder with entries in it (`done`: "listed", "removed", "counted").
void note_untrusted(const DiskCache& cache, const char* done) {
  for (const CacheUntrustedShard& u : cache.untrusted_shards()) {
    if (u.entries == 0) continue;
    print_note(fmt::format("{} in {} not {}: the cache does not use that folder: {}",
                           counted(static_cast<int64_t>(u.entries), "entry", "entries"),
                           u.path.string(), done, u.reason));
  }
}

// Throws Error when the cache is on but its directory cannot be used (the reason `stats` shows):
// `list`, `clear` and `prune` would otherwise report an empty cache.
void require_usable(const DiskCache& cache) {
  if (!cache.config().enabled) return;
  if (const std::string why = cache.problem(); !why.empty()) {
    throw Error(fmt::format("the cache directory is not usable: {}", why));
  }
}

int stats(const CacheOptions& o) {
  DiskCache cache(CacheConfig::from_env());
  CacheStats s = cache.stats();
  std::map<std::string, uint64_t> by_arch;
  for (const CacheEntryInfo& e : cache.list()) ++by_arch[e.arch.empty() ? "unreadable" : e.arch];
  uint64_t ignored = 0;
  nlohmann::json untrusted = nlohmann::json::array();
  for (const CacheUntrustedShard& u : s.untrusted) {
    ignored += u.entries;
    untrusted.push_back({{"path", u.path.string()}, {"reason", u.reason}, {"entries", u.entries}});
  }
  if (o.json) {
    nlohmann::json j = {{"dir", s.dir.string()},
                        {"enabled", s.enabled},
                        {"usable", s.enabled && s.unusable.empty()},
                        {"unusable_reason", s.unusable},
                        {"writable", s.enabled && s.unusable.empty() && s.unwritable.empty()},
                        {"unwritable_reason", s.unwritable},
                        {"entries", s.enabled ? nlohmann::json(s.entries) : nlohmann::json()},
                        {"bytes", s.enabled ? nlohmann::json(s.bytes) : nlohmann::json()},
                        {"max_bytes", s.max_bytes},
                        {"entries_by_arch", by_arch},
                        {"ignored_entries", s.enabled ? nlohmann::json(ignored) : nlohmann::json()},
                        {"untrusted_shards", untrusted}};
    std::cout << json_text(j) << "\n";
    return kOk;
  }
  std::cout << fmt::format("{:<22}{}\n", "cache directory", s.dir.string());
  std::cout << fmt::format("{:<22}{}\n", "cache", state(s));
  if (s.enabled && !s.unusable.empty())
    std::cout << fmt::format("{:<22}{}\n", "reason", s.unusable);
  if (!s.enabled) {
    // With the cache off its directory is not read: its entries are not counted (not "0").
    std::cout << fmt::format("{:<22}{}\n", "entries", "not counted (the cache is off)");
    std::cout << fmt::format("{:<22}{}\n", "size limit", limit_text(s.max_bytes));
    return kOk;
  }
  std::cout << fmt::format("{:<22}{}\n", "entries", s.entries);
  for (const auto& [arch, n] : by_arch) std::cout << fmt::format("  {:<20}{}\n", arch, n);
  if (!s.untrusted.empty()) {  // as a compile: neither loaded nor replaced (found by user testing)
    std::cout << fmt::format(
        "{:<22}{} in {} the cache does not use (neither loaded, listed nor removed):\n", "ignored",
        counted(static_cast<int64_t>(ignored), "entry", "entries"),
        counted(static_cast<int64_t>(s.untrusted.size()), "shard folder", "shard folders"));
    for (const CacheUntrustedShard& u : s.untrusted) {
      std::cout << fmt::format(
          "  {}: {}\n", counted(static_cast<int64_t>(u.entries), "entry", "entries"), u.reason);
    }
  }
  std::cout << fmt::format("{:<22}{}\n", "cache size", human_bytes(s.bytes));
  std::cout << fmt::format(
      "{:<22}{}{}\n", "size limit", limit_text(s.max_bytes),
      s.max_bytes && s.bytes ? fmt::format(" ({:.1f}% used)", 100.0 * s.bytes / s.max_bytes) : "");
  return kOk;
}

int list(const CacheOptions& o) {
  DiskCache cache(CacheConfig::from_env());
  require_usable(cache);
  std::vector<CacheEntryInfo> entries = cache.list();
  note_untrusted(cache, "listed");
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const CacheEntryInfo& e : entries) {
      all.push_back({{"key", e.key_hex},
                     {"kernel_symbol", e.kernel_symbol},
                     {"arch", e.arch},
                     {"bytes", e.bytes},
                     {"last_use", unix_seconds(e.last_use)},
                     {"path", e.path.string()}});
    }
    std::cout << json_text(all) << "\n";
    return kOk;
  }
  if (entries.empty()) {
    std::cout << (cache.config().enabled
                      ? fmt::format("no entries in {}\n", cache.config().dir.string())
                      : std::string("the cache is off (KDSL_CACHE); nothing listed\n"));
    return kOk;
  }
  std::cout << fmt::format("{:<19}  {:>10}  {:<8}  {:<32}  {}\n", "last use", "size", "arch", "key",
                           "kernel");
  for (const CacheEntryInfo& e : entries) {
    std::cout << fmt::format("{:<19}  {:>10}  {:<8}  {:<32}  {}\n",
                             local_time(unix_seconds(e.last_use)), human_bytes(e.bytes),
                             e.arch.empty() ? "?" : e.arch, e.key_hex,
                             e.kernel_symbol.empty() ? "(unreadable header)" : e.kernel_symbol);
  }
  return kOk;
}

int remove(const CacheOptions& o, bool prune) {
  CacheConfig config = CacheConfig::from_env();
  if (prune && !o.max_size.empty()) {
    auto bytes = parse_byte_size(o.max_size);
    if (!bytes) {
      throw UsageError(
          fmt::format("--max-size '{}': expected bytes with an optional K, M, G or T "
                      "suffix (powers of 1024, an optional B or iB; at most 2^64 - 1 bytes), "
                      "e.g. 512M",
                      o.max_size));
    }
    config.max_bytes = *bytes;
  }
  DiskCache cache(config);
  require_usable(cache);
  CacheRemoval r = prune ? cache.prune() : cache.clear();
  CacheStats after = cache.stats();
  note_untrusted(cache, prune ? "counted" : "removed");
  // Entries that stay because they could not be removed make the command fail (exit 1), after
  // its usual report.
  const std::string failed =
      r.failed == 0 ? ""
                    : fmt::format("could not remove {} from {}: {}",
                                  counted(static_cast<int64_t>(r.failed), "entry", "entries"),
                                  after.dir.string(), r.failure);
  if (o.json) {
    nlohmann::json j = {{"dir", after.dir.string()},    {"enabled", after.enabled},
                        {"removed_entries", r.entries}, {"removed_bytes", r.bytes},
                        {"failed_entries", r.failed},   {"failure", r.failure},
                        {"max_bytes", after.max_bytes}};
    // With the cache off its directory is not read: what is left is not counted (null, as in
    // stats), not 0 entries (found by a new-user test: clear --json said 0 left beside entries).
    j["entries"] = after.enabled ? nlohmann::json(after.entries) : nlohmann::json();
    j["bytes"] = after.enabled ? nlohmann::json(after.bytes) : nlohmann::json();
    std::cout << json_text(j) << "\n";
    if (!failed.empty()) throw Error(failed);
    return kOk;
  }
  if (!after.enabled) {
    std::cout << "the cache is off (KDSL_CACHE); nothing removed\n";
    return kOk;
  }
  std::cout << fmt::format("removed {} entr{} ({}) from {}; {} entr{} ({}) left", r.entries,
                           r.entries == 1 ? "y" : "ies", human_bytes(r.bytes), after.dir.string(),
                           after.entries, after.entries == 1 ? "y" : "ies",
                           human_bytes(after.bytes));
  if (prune) std::cout << fmt::format(", size limit {}", limit_text(after.max_bytes));
  std::cout << "\n";
  if (!failed.empty()) throw Error(failed);
  return kOk;
}

}  // namespace

Command register_cache(CLI::App& app) {
  auto o = std::make_shared<CacheOptions>();
  CLI::App* sub =
      app.add_subcommand("cache", "Inspect and clean the disk cache of compiled kernels");
  sub->require_subcommand(1);
  sub->footer(
      "The directory is KDSL_CACHE_DIR (else $XDG_CACHE_HOME/kdsl, else ~/.cache/kdsl); the size "
      "limit KDSL_CACHE_MAX_SIZE (default 1G). docs/cache.md has the details.\n"
      "Example: kdsl cache stats");
  CLI::App* st = sub->add_subcommand("stats", "Directory, entries (per architecture), size, limit");
  CLI::App* ls = sub->add_subcommand("list", "Every entry, most recently used first");
  CLI::App* cl = sub->add_subcommand("clear", "Remove every entry");
  CLI::App* pr = sub->add_subcommand(
      "prune", "Remove stale temporary files, then the least recently used entries over the limit");
  for (CLI::App* s : {st, ls, cl, pr}) s->add_flag("--json", o->json, "Print JSON");
  pr->add_option("--max-size", o->max_size,
                 "Prune down to this size instead of KDSL_CACHE_MAX_SIZE: bytes with an optional "
                 "K, M, G or T suffix (powers of 1024), e.g. 256M")
      ->check(not_blank("empty size: expected bytes with an optional K, M, G or T suffix, e.g. "
                        "256M"));
  st->footer("Example: kdsl cache stats --json");
  ls->footer(
      "Columns: last use, size, architecture, key (the file name), kernel symbol.\n"
      "Example: kdsl cache list");
  cl->footer("Example: KDSL_CACHE_DIR=/tmp/kc kdsl cache clear");
  pr->footer("Example: kdsl cache prune --max-size 256M");
  return {sub, [=]() {
            if (st->parsed()) return stats(*o);
            if (ls->parsed()) return list(*o);
            if (cl->parsed()) return remove(*o, false);
            return remove(*o, true);
          }};
}

}  // namespace kdsl::cli
