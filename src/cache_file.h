// One disk-cache entry file: its byte layout (docs/cache.md), reading and validating it, writing it
// atomically (temporary file, fsync, rename), and the per-entry lock file. Policy (when to read,
// lock, compile, evict) lives in cache.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kdsl {

inline constexpr char kEntryMagic[8] = {'K', 'D', 'S', 'L', 'B', 'I', 'N', '\0'};
inline constexpr uint32_t kCacheFormatVersion = 1;
inline constexpr size_t kEntryFixedHeaderBytes = 56;  // magic .. payload checksum
inline constexpr size_t kEntryChecksumBytes = 16;     // one XXH3-128 in canonical form
inline constexpr const char* kEntrySuffix = ".kdslbin";

/// The contents of one entry.
struct EntryFile {
  std::string key;      ///< Canonical key text (see canonical_key in cache.h).
  std::string meta;     ///< The caller's metadata (JSON text).
  std::string payload;  ///< The cubin.
};

/// The complete file bytes for an entry: header (magic, version, lengths, payload checksum, key,
/// meta, header checksum) then the payload.
std::string encode_entry(const EntryFile& entry);

/// Parses and validates file bytes. Returns the entry, or nullopt with *problem set to what is
/// wrong in words ("truncated: ...", "payload checksum mismatch", ...).
std::optional<EntryFile> decode_entry(std::string_view bytes, std::string* problem);

/// XXH3-128 of `data` as 32 lowercase hex digits (the canonical big-endian byte order).
std::string xxh128_hex(std::string_view data);

/// Faults the tests inject (KDSL_CACHE_FAULT=read,write,rename,lock): the named operation fails as
/// if the disk did (EIO on read, ENOSPC on write, EACCES on rename, ENOLCK on lock).
struct CacheFaults {
  bool read = false;
  bool write = false;
  bool rename = false;
  bool lock = false;
  /// Reads the items of `comma_list` in any case, spaces and tabs around ignored; empty items are
  /// skipped, and any other item is appended to `*unknown` (when given) as written, less the
  /// spaces around it.
  static CacheFaults parse(std::string_view comma_list,
                           std::vector<std::string>* unknown = nullptr);
};

/// The outcome of reading one entry file.
struct ReadResult {
  enum Status { kOk, kMissing, kDamaged, kIoError } status = kMissing;
  EntryFile entry;      ///< Valid when status == kOk.
  std::string problem;  ///< Why, for kDamaged and kIoError.
};

/// Reads and validates the entry at `path`. On success, sets the file's modification time to now
/// (the cache's "last use"; ignored if that fails). Never throws for file problems.
ReadResult read_entry(const std::filesystem::path& path, const CacheFaults& faults);

/// Reads only the canonical key of the entry at `path` (for listing); nullopt if unreadable.
std::optional<std::string> read_entry_key(const std::filesystem::path& path);

/// Writes `bytes` to a new temporary file beside `path` (mode 0600), fsyncs it and renames it to
/// `path`, so `path` is either absent, the old file or the complete new file. Returns an empty
/// string on success, else what failed ("cannot write /x/ab/cd.kdslbin.tmp.12.3: No space left on
/// device"); the temporary file is removed on failure.
std::string write_file_atomic(const std::filesystem::path& path, std::string_view bytes,
                              const CacheFaults& faults);

/// Whether `text` is `digits` lowercase hexadecimal digits, as in a key (cache_key_hex).
bool is_key_hex(std::string_view text, size_t digits);

/// Whether a file name in a shard folder is an entry's: the key's last 30 lowercase hex digits
/// then ".kdslbin" (docs/cache.md). Files named otherwise are not kdsl's and are left alone.
bool is_entry_file_name(std::string_view name);

/// Whether a file name is a temporary file write_file_atomic makes for an entry:
/// "<entry name>.tmp.<pid>.<n>.<random hex>".
bool is_temp_file_name(std::string_view name);

/// Whether a file name is an entry's lock file (EntryLock): "<entry name>.lock".
bool is_lock_file_name(std::string_view name);

/// An exclusive flock on `<entry>.lock`, held until destruction; the lock file is removed on
/// release. Several threads or processes asking for the same entry wait for each other.
class EntryLock {
 public:
  /// Waits up to `timeout` for the lock. Returns nullopt with *error set when the lock file cannot
  /// be created (read-only directory), locking is unsupported (some network file systems) or the
  /// wait timed out (then *timed_out, when given, is set); callers then go on without the lock.
  /// A symbolic link in the lock file's place is removed, never followed (O_NOFOLLOW), and a
  /// shard folder removed meanwhile (`kdsl cache clear`) is made again.
  static std::optional<EntryLock> acquire(const std::filesystem::path& lock_path,
                                          std::chrono::milliseconds timeout,
                                          const CacheFaults& faults, std::string* error,
                                          bool* timed_out = nullptr);
  /// Removes the lock file at `lock_path` if no process holds it (for `kdsl cache clear`): locks
  /// it without waiting, and unlinks it while holding it, as a holder does on release. Returns
  /// whether it was removed; a held lock is left alone.
  static bool remove_if_free(const std::filesystem::path& lock_path);
  EntryLock(EntryLock&& other) noexcept;
  EntryLock& operator=(EntryLock&& other) noexcept;
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;
  ~EntryLock();

 private:
  EntryLock(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  void release() noexcept;
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace kdsl
