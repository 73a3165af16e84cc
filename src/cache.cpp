#include "src/cache.h"
#include "log.h"
#include "text_util.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace kdsl {
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Keys

std::string canonical_key(const CacheKeyInputs& key) {
  std::string out;
  auto field = [&out](std::string_view name, std::string_view value) {
    out += fmt::format("{} {}\n", name, value.size());
    out += value;
    out += '\n';
  };
  field("kdsl-cache-format", std::to_string(kCacheFormatVersion));
  field("kdsl", key.kdsl_version);
  field("nvrtc", key.nvrtc_version);
  field("arch", key.arch);
  field("symbol", key.kernel_symbol);
  field("options", std::to_string(key.options.size()));
  for (const auto& o : key.options) field("option", o);
  field("source", key.source);
  return out;
}

namespace {

// Reads the fields canonical_key writes, in order.
class KeyReader {
 public:
  explicit KeyReader(std::string_view text) : rest_(text) {}

  std::optional<std::string> field(std::string_view name) {
    if (!rest_.starts_with(name) || rest_.substr(name.size()).substr(0, 1) != " ") return {};
    rest_.remove_prefix(name.size() + 1);
    size_t len = 0;
    auto [end, ec] = std::from_chars(rest_.data(), rest_.data() + rest_.size(), len);
    size_t header = static_cast<size_t>(end - rest_.data());
    if (ec != std::errc() || header >= rest_.size() || *end != '\n') return {};
    rest_.remove_prefix(header + 1);
    if (len >= rest_.size() || rest_[len] != '\n') return {};
    std::string value(rest_.substr(0, len));
    rest_.remove_prefix(len + 1);
    return value;
  }
  bool done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace

std::optional<CacheKeyInputs> parse_canonical_key(std::string_view text) {
  KeyReader r(text);
  CacheKeyInputs k;
  auto format = r.field("kdsl-cache-format");
  auto kdsl = r.field("kdsl");
  auto nvrtc = r.field("nvrtc");
  auto arch = r.field("arch");
  auto symbol = r.field("symbol");
  auto count = r.field("options");
  if (!format || *format != std::to_string(kCacheFormatVersion) || !kdsl || !nvrtc || !arch ||
      !symbol || !count) {
    return std::nullopt;
  }
  size_t n = 0;
  auto [end, ec] = std::from_chars(count->data(), count->data() + count->size(), n);
  if (ec != std::errc() || end != count->data() + count->size() || n > text.size()) return {};
  for (size_t i = 0; i < n; ++i) {
    auto option = r.field("option");
    if (!option) return std::nullopt;
    k.options.push_back(std::move(*option));
  }
  auto source = r.field("source");
  if (!source || !r.done()) return std::nullopt;
  k.source = std::move(*source);
  k.arch = std::move(*arch);
  k.nvrtc_version = std::move(*nvrtc);
  k.kdsl_version = std::move(*kdsl);
  k.kernel_symbol = std::move(*symbol);
  return k;
}

std::string cache_key_hex(const CacheKeyInputs& key) {
  return xxh128_hex(canonical_key(key));
}

// ---------------------------------------------------------------------------------------------
// Configuration

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string suffix(end, text.data() + text.size());
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // B, or a unit as K, KB or KiB (any case): "1BB" or "1iB" is malformed, not 1 byte.
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  const char* units = "KMGT";
  for (int u = 0; u < 4; ++u) {
    const std::string k(1, units[u]);
    if (suffix == k || suffix == k + "B" || suffix == k + "IB") shift = 10 * (u + 1);
  }
  if (shift < 0) return std::nullopt;
  if (shift > 0 && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

fs::path default_cache_dir() {
  // A blank value is unset, as for the other variables (not a directory named by its blanks).
  if (std::string dir = env("KDSL_CACHE_DIR"); !trim_blanks(dir).empty()) {
    return fs::absolute(dir);
  }
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/') {
    return fs::path(xdg) / "kdsl";
  }
  std::string home = env("HOME");
  if (home.empty()) {
    if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_dir != nullptr) {
      home = pw->pw_dir;
    }
  }
  return home.empty() ? fs::path() : fs::path(home) / ".cache" / "kdsl";
}

// Logs `message` as a warning the first time it is given in this process (the environment is
// read once per DiskCache).
void warn_once(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(message).second) log().warn("{}", message);
}

// KDSL_CACHE: off, 0, false or no turn the cache off; on, 1, true, yes or nothing leave it on (any
// case, spaces around ignored). Another value is warned about once per process and leaves it on.
bool cache_enabled(const std::string& text) {
  const std::string mode = env_word(text);
  if (mode == "off" || mode == "0" || mode == "false" || mode == "no") return false;
  if (mode.empty() || mode == "on" || mode == "1" || mode == "true" || mode == "yes") return true;
  warn_once(fmt::format(
      "kdsl cache: ignoring KDSL_CACHE='{}': expected off (or 0, false, no) or on (or 1, true, "
      "yes); the disk cache is on",
      text));
  return true;
}

// KDSL_CACHE_FAULT; each unknown item is warned about once per process (found by user testing:
// they were ignored in silence, so a test ran without the failure it meant to inject).
CacheFaults cache_faults(const std::string& text) {
  std::vector<std::string> unknown;
  CacheFaults faults = CacheFaults::parse(text, &unknown);
  for (const std::string& item : unknown) {
    warn_once(fmt::format(
        "kdsl cache: ignoring '{}' in KDSL_CACHE_FAULT='{}': expected a comma list of read, "
        "write, rename, lock (tests only)",
        item, text));
  }
  return faults;
}

}  // namespace

CacheConfig CacheConfig::from_env() {
  CacheConfig c;
  c.dir = default_cache_dir();
  c.enabled = cache_enabled(env("KDSL_CACHE"));
  if (std::string size = env("KDSL_CACHE_MAX_SIZE"); !trim_blanks(size).empty()) {
    if (auto bytes = parse_byte_size(size)) {
      c.max_bytes = *bytes;
    } else {
      log().warn(
          "kdsl cache: ignoring KDSL_CACHE_MAX_SIZE='{}': expected bytes with an optional "
          "K, M, G or T suffix (powers of 1024, an optional B or iB; at most 2^64 - 1 bytes; "
          "e.g. 512M, 2G); using {} bytes",
          size, c.max_bytes);
    }
  }
  c.faults = cache_faults(env("KDSL_CACHE_FAULT"));
  return c;
}

// ---------------------------------------------------------------------------------------------
// The directory

namespace {

// Creates `dir` and its missing parents with mode 0700. Returns "" or what failed.
std::string make_private_dirs(const fs::path& dir) {
  fs::path prefix;
  for (const auto& part : dir) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return fmt::format("cannot create {}: {}", prefix.string(), std::strerror(errno));
    }
  }
  return {};
}

// Why directory `dir` (status `st`) cannot be trusted with binaries, or "": owned by another user
// or writable by group or others, so that someone else could plant a binary in it.
std::string trust_problem(const fs::path& dir, const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    return fmt::format(
        "{} is owned by user id {}, not by you (user id {}), so it could hold "
        "binaries you did not build",
        dir.string(), st.st_uid, ::geteuid());
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format(
        "{} is writable by group or others (mode {:04o}), so another user could "
        "plant a binary in it; make it private (chmod go-w {})",
        dir.string(), st.st_mode & 07777, dir.string());
  }
  return {};
}

// Why an entry's shard directory `sub` (DIR/xx) must not be used, or "" if it may (or is not made
// yet: it is created 0700). It is trusted as the cache directory is (directory_problem), and must
// be a real directory, not a symbolic link.
std::string shard_problem(const fs::path& sub) {
  struct stat st {};
  if (::lstat(sub.c_str(), &st) != 0) return {};
  if (S_ISLNK(st.st_mode))
    return fmt::format("{} is a symbolic link, not a directory", sub.string());
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", sub.string());
  return trust_problem(sub, st);
}

// Why `dir` must not be used, or "" if it may. Creates it first when `create`.
std::string directory_problem(const fs::path& dir, bool create) {
  if (dir.empty()) return "no cache directory: HOME is not set";
  if (create) {
    if (std::string err = make_private_dirs(dir); !err.empty()) return err;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    // Not created yet is fine when not creating; a path through a regular file (ENOTDIR) or
    // one we may not search is not.
    return create || errno != ENOENT
               ? fmt::format("cannot use {}: {}", dir.string(), std::strerror(errno))
               : "";
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", dir.string());
  // Listing the entries (stats, list, clear, prune) needs read permission; compiling opens them by
  // name, which a directory it may search but not list allows.
  if (!create && ::faccessat(AT_FDCWD, dir.c_str(), R_OK | X_OK, AT_EACCESS) != 0) {
    return fmt::format("cannot read {}: {}", dir.string(), std::strerror(errno));
  }
  return trust_problem(dir, st);
}

// Why no directory can be made in `dir`, or "" if one can: tried with a uniquely named one, removed
// at once (a compile makes DIR, or a shard folder DIR/xx, before any entry).
std::string mkdir_problem(const fs::path& dir) {
  static std::atomic<uint64_t> counter{0};
  const fs::path probe = dir / fmt::format(".kdsl-write-probe.{}.{}", ::getpid(), counter++);
  if (::mkdir(probe.c_str(), 0700) != 0) return errno == EEXIST ? "" : std::strerror(errno);
  ::rmdir(probe.c_str());
  return {};
}

// Why a compile cannot make DIR, or its shard folders when DIR exists (see DiskCache::
// write_problem), or "".
std::string directory_write_problem(const fs::path& dir) {
  fs::path existing = dir, missing;  // `missing`: the first part of dir that does not exist
  struct stat st {};
  while (::stat(existing.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT || existing == existing.parent_path() || existing.parent_path().empty()) {
      return fmt::format("cannot create {}: {}", existing.string(), std::strerror(err));
    }
    if (::lstat(existing.c_str(), &st) == 0) {  // a link to nothing: mkdir says EEXIST, then no
      return fmt::format("cannot use {}: {} is a symbolic link to nothing", dir.string(),
                         existing.string());
    }
    missing = existing;
    existing = existing.parent_path();
  }
  const std::string why = mkdir_problem(existing);
  if (why.empty()) return {};
  return missing.empty() ? fmt::format("cannot write in {}: {}", dir.string(), why)
                         : fmt::format("cannot create {}: {}", missing.string(), why);
}

struct ScannedFile {
  fs::path path;
  uint64_t bytes = 0;
  fs::file_time_type mtime;
};

struct Scan {
  std::vector<ScannedFile> entries;
  std::vector<ScannedFile> temps;  // temporary files of writers, live or abandoned
  std::vector<fs::path> locks;
  std::vector<fs::path> shards;                // the shard folders the files are in
  std::vector<CacheUntrustedShard> untrusted;  // shard folders left out (shard_problem)
};

// A temporary file older than this is a crashed writer's (a live one renames it within seconds).
constexpr std::chrono::hours kStaleTempAge{1};

// A shard folder: the key's first 2 hex digits, lowercase as cache_key_hex writes them.
bool is_shard_name(const std::string& name) {
  return is_key_hex(name, 2);
}

// Calls fn for each entry of directory `dir`; never throws: a directory that cannot be opened,
// or a read that fails part-way, ends the listing there (range-for over a directory_iterator
// would throw from its increment).
template <class Fn>
void each_entry(const fs::path& dir, Fn&& fn) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) fn(*it);
}

// Lists the files of the cache; never throws (unreadable parts are skipped). Only regular files
// (or links to them) named as kdsl names them (`<2 hex>/<30 hex>.kdslbin`, its temporary and lock
// files; docs/cache.md) are entries, temporary or lock files: anything else, such as a directory
// named like an entry or a user's file `ab/my.kdslbin`, is neither counted nor listed nor removed.
// Nor are the files of a shard folder that loads do not use (shard_problem: a symbolic link, or
// a folder others could write to): such folders are only named, with their number of entries.
Scan scan(const fs::path& dir) {
  Scan out;
  each_entry(dir, [&](const fs::directory_entry& shard) {
    std::error_code ec;
    if (!is_shard_name(shard.path().filename().string()) || !shard.is_directory(ec)) return;
    if (std::string why = shard_problem(shard.path()); !why.empty()) {
      CacheUntrustedShard u{shard.path(), std::move(why), 0};
      each_entry(shard.path(), [&](const fs::directory_entry& file) {
        std::error_code type_ec;
        u.entries +=
            is_entry_file_name(file.path().filename().string()) && file.is_regular_file(type_ec);
      });
      out.untrusted.push_back(std::move(u));
      return;
    }
    out.shards.push_back(shard.path());
    each_entry(shard.path(), [&](const fs::directory_entry& file) {
      const std::string name = file.path().filename().string();
      // One error code each: a call that succeeds clears the code it is given.
      std::error_code type_ec, size_ec, time_ec;
      if (!file.is_regular_file(type_ec)) return;  // not a file, or removed while we looked
      ScannedFile f{file.path(), file.file_size(size_ec), file.last_write_time(time_ec)};
      if (size_ec || time_ec) return;  // removed while we looked
      if (is_entry_file_name(name))
        out.entries.push_back(f);
      else if (is_temp_file_name(name))
        out.temps.push_back(f);
      else if (is_lock_file_name(name))
        out.locks.push_back(f.path);
    });
  });
  return out;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Why a stored key is not the requested one, in words.
std::string key_mismatch(const std::string& stored, const CacheKeyInputs& want) {
  auto got = parse_canonical_key(stored);
  if (!got) return "its stored key is unreadable";
  if (got->arch != want.arch)
    return fmt::format("it was built for {}, not {}", got->arch, want.arch);
  if (got->kernel_symbol != want.kernel_symbol) {
    return fmt::format("it holds kernel '{}', not '{}'", got->kernel_symbol, want.kernel_symbol);
  }
  return "its stored key differs from the requested one (a file copied under another name?)";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DiskCache

DiskCache::DiskCache(CacheConfig config) : config_(std::move(config)) {}

fs::path DiskCache::entry_path(const std::string& key_hex) const {
  return config_.dir / key_hex.substr(0, 2) / (key_hex.substr(2) + kEntrySuffix);
}

bool DiskCache::usable() {
  std::call_once(ready_once_, [this] {
    unusable_ = directory_problem(config_.dir, /*create=*/true);
    if (!unusable_.empty()) {
      log().warn(
          "kdsl cache: not using the cache directory: {}. Kernels are compiled in memory "
          "for this process; set KDSL_CACHE_DIR to a private, writable directory (or "
          "KDSL_CACHE=off to silence this).",
          unusable_);
    }
  });
  return unusable_.empty();
}

void DiskCache::warn_io(const std::string& what) {
  if (!io_warned_.exchange(true)) {
    log().warn(
        "kdsl cache: {}; compiling in memory instead (kernels work, but may not be cached). "
        "Check free space and permissions of {} (further cache I/O errors in this process "
        "are logged at debug level).",
        what, config_.dir.string());
  } else {
    log().debug("kdsl cache: {}", what);
  }
}

std::optional<CompiledEntry> DiskCache::lookup(const fs::path& path, const CacheKeyInputs& key,
                                               const std::string& canonical, bool second_look,
                                               std::string* blocked) {
  ReadResult r = read_entry(path, config_.faults);
  std::string problem = r.problem;
  if (r.status == ReadResult::kOk && r.entry.key != canonical) {
    r.status = ReadResult::kDamaged;
    problem = key_mismatch(r.entry.key, key);
  }
  switch (r.status) {
    case ReadResult::kOk: {
      CompiledEntry e;
      e.cubin = std::move(r.entry.payload);
      e.meta = std::move(r.entry.meta);
      e.hit = true;
      return e;
    }
    case ReadResult::kMissing:
      return std::nullopt;
    case ReadResult::kIoError:
      warn_io(problem);
      return std::nullopt;
    case ReadResult::kDamaged:
      break;
  }
  if (!second_look) return std::nullopt;
  // With the lock held (when locking works), so no writer races the removal. A directory in the
  // entry's place is not kdsl's: removed only when empty (rmdir), else left as it is, with what
  // is in it, and the kernel is not stored (its file could not be renamed over a directory).
  struct stat st {};
  const bool dir = ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const int err = (dir ? ::rmdir(path.c_str()) : ::unlink(path.c_str())) == 0 ? 0 : errno;
  if (err == 0 || err == ENOENT) {
    log().warn("kdsl cache: removed the entry {} for kernel '{}' ({}): {}; compiling it again",
               path.string(), key.kernel_symbol, key.arch, dir ? "an empty directory" : problem);
  } else if (dir && (err == ENOTEMPTY || err == EEXIST)) {
    *blocked = fmt::format("{} is a directory that is not empty, in the place of the entry",
                           path.string());
    log().warn(
        "kdsl cache: the entry {} for kernel '{}' ({}) is a directory that is not empty; it is "
        "left in place, and the kernel is compiled without being stored (remove the directory to "
        "cache it again)",
        path.string(), key.kernel_symbol, key.arch);
  } else {
    warn_io(fmt::format("cannot remove the damaged entry {} for kernel '{}' ({}; {}): {}",
                        path.string(), key.kernel_symbol, key.arch, problem, std::strerror(err)));
  }
  return std::nullopt;
}

std::string DiskCache::store(const fs::path& path, const std::string& canonical,
                             const std::string& meta, const std::string& cubin) {
  std::string err;
  if (::mkdir(path.parent_path().c_str(), 0700) != 0 && errno != EEXIST) {
    err = fmt::format("cannot create {}: {}", path.parent_path().string(), std::strerror(errno));
  } else {
    err = write_file_atomic(path, encode_entry({canonical, meta, cubin}), config_.faults);
  }
  if (!err.empty()) warn_io(err);
  return err;
}

CompiledEntry DiskCache::get_or_compile(const CacheKeyInputs& key, const std::string& meta,
                                        const std::function<std::string()>& compile) {
  const auto start = std::chrono::steady_clock::now();
  const std::string canonical = canonical_key(key);
  CompiledEntry result;
  result.key_hex = xxh128_hex(canonical);
  auto finish = [&](const char* what) {
    result.load_ms = ms_since(start) - result.compile_ms;
    if (result.hit) {
      log().info("kdsl cache: hit '{}' for {} (key {}) in {:.2f} ms", key.kernel_symbol, key.arch,
                 result.key_hex, result.load_ms);
    } else {
      log().info("kdsl cache: {} '{}' for {} (key {}): compile {:.1f} ms, cache {:.2f} ms", what,
                 key.kernel_symbol, key.arch, result.key_hex, result.compile_ms, result.load_ms);
    }
  };
  auto compile_now = [&] {
    ++misses_;
    const auto t = std::chrono::steady_clock::now();
    result.cubin = compile();
    result.compile_ms = ms_since(t);
    result.meta = meta;
    result.hit = false;
  };
  if (!config_.enabled || !usable()) {
    compile_now();
    result.not_stored = config_.enabled ? unusable_ : "the disk cache is off (KDSL_CACHE)";
    finish(config_.enabled ? "in-memory compile of" : "cache off, compiled");
    return result;
  }
  const fs::path path = entry_path(result.key_hex);
  if (std::string why = shard_problem(path.parent_path()); !why.empty()) {
    // Neither read nor written (found by a new-user test: only the cache directory was checked).
    warn_io(fmt::format("not using the entries of {}: {}", path.parent_path().string(), why));
    compile_now();
    result.not_stored = std::move(why);
    finish("in-memory compile of");
    return result;
  }
  std::string blocked;  // why the entry's place cannot take the entry
  auto hit = lookup(path, key, canonical, /*second_look=*/false, &blocked);
  std::optional<EntryLock> lock;
  if (!hit) {
    ::mkdir(path.parent_path().c_str(), 0700);  // failures show up as lock or write errors
    std::string lock_error;
    bool timed_out = false;
    lock = EntryLock::acquire(fs::path(path) += ".lock", config_.lock_timeout, config_.faults,
                              &lock_error, &timed_out);
    if (!lock && timed_out) {  // a holder stopped or hung: worth saying (found by a new-user test)
      log().warn("kdsl cache: {}; compiling without it", lock_error);
    } else if (!lock) {
      log().debug("kdsl cache: going on without the entry lock: {}", lock_error);
    }
    hit = lookup(path, key, canonical, /*second_look=*/true, &blocked);
  }
  if (hit) {
    ++hits_;
    hit->key_hex = result.key_hex;
    result = std::move(*hit);
    finish("hit");
    return result;
  }
  compile_now();  // on an exception, `lock` is released and nothing is stored
  result.not_stored = blocked.empty() ? store(path, canonical, meta, result.cubin) : blocked;
  const bool stored = result.not_stored.empty();
  lock.reset();
  if (stored && config_.max_bytes > 0) evict(path);
  finish(stored ? "miss, compiled and stored" : "miss, compiled (not stored)");
  return result;
}

std::string DiskCache::problem() const {
  return config_.enabled ? directory_problem(config_.dir, /*create=*/false) : "KDSL_CACHE=off";
}

std::string DiskCache::write_problem() const {
  if (std::string why = directory_write_problem(config_.dir); !why.empty()) return why;
  if (config_.faults.write) return "every store fails (KDSL_CACHE_FAULT=write)";
  if (config_.faults.rename) return "every store fails (KDSL_CACHE_FAULT=rename)";
  return {};
}

CacheStats DiskCache::stats() const {
  CacheStats s;
  s.dir = config_.dir;
  s.enabled = config_.enabled;
  s.unusable = problem();
  if (s.enabled && s.unusable.empty()) s.unwritable = write_problem();
  s.max_bytes = config_.max_bytes;
  s.hits = hits_.load();
  s.misses = misses_.load();
  if (!config_.enabled) return s;
  Scan files = scan(config_.dir);
  for (const auto& e : files.entries) {
    ++s.entries;
    s.bytes += e.bytes;
  }
  s.untrusted = std::move(files.untrusted);
  return s;
}

std::vector<CacheUntrustedShard> DiskCache::untrusted_shards() const {
  return config_.enabled ? scan(config_.dir).untrusted : std::vector<CacheUntrustedShard>{};
}

std::vector<CacheEntryInfo> DiskCache::list() const {
  std::vector<CacheEntryInfo> out;
  if (!config_.enabled) return out;
  for (const auto& e : scan(config_.dir).entries) {
    CacheEntryInfo info;
    info.path = e.path;
    std::string stem = e.path.filename().string();
    info.key_hex = e.path.parent_path().filename().string() +
                   stem.substr(0, stem.size() - std::strlen(kEntrySuffix));
    info.bytes = e.bytes;
    info.last_use = e.mtime;
    if (auto text = read_entry_key(e.path)) {
      if (auto key = parse_canonical_key(*text)) {
        info.kernel_symbol = key->kernel_symbol;
        info.arch = key->arch;
      }
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.last_use > b.last_use; });
  return out;
}

bool CacheRemoval::remove(const fs::path& path, uint64_t size) {
  std::error_code ec;
  if (fs::remove(path, ec)) {
    ++entries;
    bytes += size;
    return true;
  }
  if (ec && failed++ == 0) failure = ec.message();  // (no error: another process removed it)
  return false;
}

CacheRemoval DiskCache::clear() {
  CacheRemoval removed;
  if (!config_.enabled) return removed;
  Scan s = scan(config_.dir);
  std::error_code ec;
  for (const auto& e : s.entries) removed.remove(e.path, e.bytes);
  // A compile running meanwhile keeps its temporary file (younger than an hour: it is about to
  // be renamed into place) and its held lock (found by a new-user test: a clear made concurrent
  // compiles fail, or compile one kernel twice).
  const auto stale = fs::file_time_type::clock::now() - kStaleTempAge;
  for (const auto& t : s.temps) {
    if (t.mtime < stale) fs::remove(t.path, ec);
  }
  for (const auto& l : s.locks) EntryLock::remove_if_free(l);
  // Removed after the listing, not while iterating; only real, trusted folders (a file named like
  // a shard is not the cache's, and a link in a shard's place is not followed nor removed).
  for (const auto& shard : s.shards) fs::remove(shard, ec);  // if empty
  return removed;
}

CacheRemoval DiskCache::prune() {
  return config_.enabled ? evict({}) : CacheRemoval{};
}

CacheRemoval DiskCache::evict(const fs::path& keep) const {
  Scan s = scan(config_.dir);
  std::error_code ec;
  const auto stale = fs::file_time_type::clock::now() - kStaleTempAge;
  for (const auto& t : s.temps) {
    if (t.mtime < stale) fs::remove(t.path, ec);  // left by a crashed writer
  }
  uint64_t total = 0;
  for (const auto& e : s.entries) total += e.bytes;
  CacheRemoval removed;
  if (config_.max_bytes == 0 || total <= config_.max_bytes) return removed;
  std::sort(s.entries.begin(), s.entries.end(),
            [](const auto& a, const auto& b) { return a.mtime < b.mtime; });
  for (const auto& e : s.entries) {
    if (total <= config_.max_bytes) break;
    if (e.path == keep) continue;
    if (removed.remove(e.path, e.bytes)) {
      total -= e.bytes;
      std::lock_guard<std::mutex> lock(evicted_mu_);
      evicted_.insert(e.path);
    }
  }
  log().info(
      "kdsl cache: evicted {} least recently used entries ({} bytes) to stay within the "
      "limit of {} bytes (KDSL_CACHE_MAX_SIZE)",
      removed.entries, removed.bytes, config_.max_bytes);
  return removed;
}

bool DiskCache::evicted(const std::string& key_hex) const {
  std::lock_guard<std::mutex> lock(evicted_mu_);
  return evicted_.contains(entry_path(key_hex));
}

DiskCache& default_disk_cache() {
  static DiskCache cache(CacheConfig::from_env());
  return cache;
}

CompiledEntry compile_cached(const CacheKeyInputs& key, const std::string& meta,
                             std::function<std::string()> compile) {
  return default_disk_cache().get_or_compile(key, meta, compile);
}

}  // namespace kdsl
