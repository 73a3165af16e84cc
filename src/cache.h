// The disk cache of compiled kernels: one self-contained, checksummed file per cubin, keyed by a
// full-length hash of everything that affects the binary, safe for many processes sharing one
// directory. Layout, key and failure behavior: docs/cache.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/cache_file.h"

namespace kdsl {

/// Everything that affects a cubin. Never put compiler output here.
struct CacheKeyInputs {
  std::string source;                ///< The complete generated CUDA C++.
  std::vector<std::string> options;  ///< The full NVRTC option list (see nvrtc_options).
  std::string arch;                  ///< Exact architecture, suffix included ("sm_90a").
  std::string nvrtc_version;         ///< nvrtc_version(), e.g. "13.0".
  std::string kdsl_version;          ///< KDSL_VERSION.
  std::string kernel_symbol;         ///< The kernel's symbol in the cubin.
  bool operator==(const CacheKeyInputs&) const = default;
};

/// The canonical serialization of a key (with the cache format version): "<field> <length>\n"
/// then the bytes and "\n" for each field, in a fixed order. Equal inputs give equal bytes on every
/// machine and in every process.
std::string canonical_key(const CacheKeyInputs& key);

/// The inverse of canonical_key; nullopt for text it did not produce.
std::optional<CacheKeyInputs> parse_canonical_key(std::string_view text);

/// The entry name: XXH3-128 of canonical_key(key), 32 lowercase hex digits.
std::string cache_key_hex(const CacheKeyInputs& key);

/// Parses a size in bytes with an optional K, M, G or T suffix (powers of 1024, an optional
/// trailing "B" or "iB"; any case; spaces and tabs around ignored): "1G", "512m", " 1048576 ".
/// nullopt when malformed.
std::optional<uint64_t> parse_byte_size(std::string_view text);

/// Where and how the cache works.
struct CacheConfig {
  std::filesystem::path dir;                       ///< Root directory of the entries.
  bool enabled = true;                             ///< False: never touch the disk.
  uint64_t max_bytes = uint64_t{1} << 30;          ///< Size limit of all entries; 0 = no limit.
  std::chrono::milliseconds lock_timeout{120000};  ///< Longest wait for another process's compile.
  CacheFaults faults;                              ///< Injected failures, for tests.

  /// From the environment: KDSL_CACHE_DIR, else $XDG_CACHE_HOME/kdsl, else $HOME/.cache/kdsl;
  /// KDSL_CACHE=off (or 0, false, no) disables; KDSL_CACHE_MAX_SIZE; KDSL_CACHE_FAULT. Values are
  /// read in any case with spaces around ignored; a blank one is unset. A malformed size, or a
  /// KDSL_CACHE other than those and on, 1, true, yes, is warned about and the default kept.
  static CacheConfig from_env();
};

/// The result of compile_cached.
struct CompiledEntry {
  std::string cubin;
  std::string meta;        ///< The metadata stored with the entry (the caller's, on a miss).
  bool hit = false;        ///< Whether the cubin came from disk (compile() was not called).
  std::string not_stored;  ///< Why a compiled cubin is not on disk ("" when stored, or a hit).
  double compile_ms = 0;   ///< Time in compile(), milliseconds (0 on a hit).
  double load_ms = 0;      ///< Time in the cache itself (lookup, lock wait, store), milliseconds.
  std::string key_hex;
};

/// A shard folder (DIR/xx) the cache does not trust: writable by group or others, owned by another
/// user, or a symbolic link. Its entries are neither loaded nor replaced, nor counted, listed,
/// evicted or removed (docs/cache.md).
struct CacheUntrustedShard {
  std::filesystem::path path;
  std::string reason;    ///< Why, with the fix ("DIR/ab is writable by group or others ...").
  uint64_t entries = 0;  ///< Files in it named as entries are.
};

/// For `kdsl cache stats`.
struct CacheStats {
  std::filesystem::path dir;
  bool enabled = false;  ///< KDSL_CACHE is not off.
  std::string unusable;  ///< Why the directory is not used (empty when it is, or not yet known).
  /// Why a compile cannot store what it compiles there (it keeps it in memory), "" when it can or
  /// when `unusable` says more: write_problem().
  std::string unwritable;
  uint64_t entries = 0;    ///< Entries the cache uses (none of those in `untrusted`).
  uint64_t bytes = 0;      ///< Total size of the entry files.
  uint64_t max_bytes = 0;  ///< The limit; 0 = none.
  uint64_t hits = 0;       ///< In this process, through this DiskCache.
  uint64_t misses = 0;
  std::vector<CacheUntrustedShard> untrusted;  ///< Shard folders whose entries are not used.
};

/// For `kdsl cache list`: one entry, read from its header.
struct CacheEntryInfo {
  std::string key_hex;
  std::string kernel_symbol;  ///< Empty when the header is unreadable.
  std::string arch;
  uint64_t bytes = 0;
  std::filesystem::file_time_type last_use;
  std::filesystem::path path;
};

/// For `kdsl cache clear | prune`.
struct CacheRemoval {
  uint64_t entries = 0;  ///< Entry files removed.
  uint64_t bytes = 0;    ///< Their total size.
  uint64_t failed = 0;   ///< Entry files that could not be removed (e.g. a read-only directory).
  std::string failure;   ///< Why the first of them could not be, e.g. "Permission denied".

  /// Removes entry `path` of `bytes` bytes and counts it, or why it failed; true if removed.
  bool remove(const std::filesystem::path& path, uint64_t bytes);
};

/// A cache directory. Thread-safe; any number of processes may share the directory.
class DiskCache {
 public:
  explicit DiskCache(CacheConfig config);

  /// Returns the cubin for `key`: from the entry on disk when a valid one exists (its stored key
  /// equal to `key`, checksums intact), else from compile(), then stored with `meta`. A miss locks
  /// the entry and looks again first, so concurrent processes compile once. Damaged or mismatched
  /// entries are removed and rebuilt (one warning each); I/O failures degrade to compiling in
  /// memory (one warning per DiskCache). Exceptions from compile() propagate unchanged and nothing
  /// is stored.
  CompiledEntry get_or_compile(const CacheKeyInputs& key, const std::string& meta,
                               const std::function<std::string()>& compile);

  /// Why the directory cannot be used as it is now ("" when it can, or when it does not exist yet
  /// and may be created; "KDSL_CACHE=off" when the cache is off): a path through a regular file, a
  /// directory kdsl may not read, one writable by group or others or owned by another user. Creates
  /// nothing.
  std::string problem() const;
  /// Why a compile cannot store kernels in the directory ("" when it can): the directory cannot be
  /// created ("cannot create DIR: REASON"; a compile then uses no entry at all), one that exists
  /// cannot be written ("cannot write in DIR: REASON"; its entries still load), or
  /// KDSL_CACHE_FAULT fails every store. Found by making and removing an empty directory with a
  /// unique name where a compile would make one (in DIR, else in its deepest existing parent),
  /// so it leaves nothing behind; permissions alone do not tell (root, /proc, read-only mounts).
  std::string write_problem() const;
  /// Counts the entries on disk and reports this object's hits and misses.
  CacheStats stats() const;
  /// Every entry, most recently used first. Like stats, clear and prune, it leaves out the shard
  /// folders untrusted_shards() names.
  std::vector<CacheEntryInfo> list() const;
  /// The shard folders whose entries the cache does not use (for notes: "not listed").
  std::vector<CacheUntrustedShard> untrusted_shards() const;
  /// Removes every entry, temporary files older than an hour (a running compile's are kept) and
  /// lock files that no process holds.
  CacheRemoval clear();
  /// Removes temporary files older than an hour, then the least recently used entries until the
  /// total is within max_bytes.
  CacheRemoval prune();

  /// `<dir>/<first 2 hex digits>/<other 30>.kdslbin`.
  std::filesystem::path entry_path(const std::string& key_hex) const;
  /// Whether this object evicted the entry of `key_hex` to stay within max_bytes since it was
  /// made (after a later store: `kdsl compile` reports such kernels as not stored).
  bool evicted(const std::string& key_hex) const;
  const CacheConfig& config() const { return config_; }

 private:
  bool usable();
  /// The entry at `path` when it is valid for `key`. On the second look (`locked`), a damaged
  /// entry is removed, or, where that cannot be done safely (a directory with files in it), left
  /// in place with `*blocked` set to why the kernel cannot be stored there.
  std::optional<CompiledEntry> lookup(const std::filesystem::path& path, const CacheKeyInputs& key,
                                      const std::string& canonical, bool locked,
                                      std::string* blocked);
  /// "" when stored, else what failed.
  std::string store(const std::filesystem::path& path, const std::string& canonical,
                    const std::string& meta, const std::string& cubin);
  CacheRemoval evict(const std::filesystem::path& keep) const;
  void warn_io(const std::string& what);

  CacheConfig config_;
  std::once_flag ready_once_;
  std::string unusable_;  // written once under ready_once_
  std::atomic<bool> io_warned_{false};
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  mutable std::mutex evicted_mu_;
  mutable std::set<std::filesystem::path> evicted_;  // entries evict() removed
};

/// The process-wide cache, configured from the environment on first use.
DiskCache& default_disk_cache();

/// default_disk_cache().get_or_compile(key, meta, compile).
CompiledEntry compile_cached(const CacheKeyInputs& key, const std::string& meta,
                             std::function<std::string()> compile);

}  // namespace kdsl
