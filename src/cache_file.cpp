#include "src/cache_file.h"
#include "dsl/fd.h"
#include "src/text_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>
#include <utility>

namespace kdsl {
namespace {

constexpr uint64_t kMaxEntryBytes = uint64_t{4} << 30;

std::string errno_text(int err) {
  return std::strerror(err);
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view bytes, size_t offset, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[offset + static_cast<size_t>(i)]);
  }
  return v;
}

std::string xxh128_raw(std::string_view data) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(data.data(), data.size()));
  return std::string(reinterpret_cast<const char*>(c.digest), sizeof(c.digest));
}

// Reads all of fd (of `size` bytes by fstat) into a string. Returns errno, 0 on success.
int read_all(int fd, size_t size, std::string* out) {
  out->assign(size, '\0');
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, out->data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;  // Shrunk under us: report what was there; validation catches it.
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return 0;
}

int write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

std::string temp_path_for(const std::filesystem::path& path) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}.tmp.{}.{}.{:x}", path.string(), ::getpid(), counter.fetch_add(1), rng());
}

// What is in the place of an entry that cannot be opened (open failed with `err`) when it is not
// an entry file at all, so a damaged entry that a compile removes and replaces (docs/cache.md):
// a symbolic link that loops or points to nothing, or a socket (or a link to one). "" otherwise:
// nothing there (a miss), or an I/O error.
std::string not_an_entry(const std::filesystem::path& path, int err) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  struct stat followed {};
  if (err == ENXIO && ::stat(path.c_str(), &followed) == 0 && S_ISSOCK(followed.st_mode)) {
    return "not a regular file";  // as a FIFO is (read_entry)
  }
  if (S_ISLNK(st.st_mode) && err == ELOOP) return "a symbolic link that loops";
  if (S_ISLNK(st.st_mode) && err == ENOENT) {  // (found by user testing: replaced silently)
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
    return fmt::format("a symbolic link to {}, which does not exist", target.string());
  }
  return {};
}

}  // namespace

std::string xxh128_hex(std::string_view data) {
  std::string raw = xxh128_raw(data);
  std::string hex;
  for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
  return hex;
}

std::string encode_entry(const EntryFile& entry) {
  std::string out(kEntryMagic, sizeof(kEntryMagic));
  put_u32(out, kCacheFormatVersion);
  put_u32(out, 0);  // reserved
  put_u64(out, entry.key.size());
  put_u64(out, entry.meta.size());
  put_u64(out, entry.payload.size());
  out += xxh128_raw(entry.payload);
  out += entry.key;
  out += entry.meta;
  out += xxh128_raw(out);  // header checksum over everything so far
  out += entry.payload;
  return out;
}

std::optional<EntryFile> decode_entry(std::string_view bytes, std::string* problem) {
  auto fail = [&](std::string why) {
    *problem = std::move(why);
    return std::nullopt;
  };
  if (bytes.size() < kEntryFixedHeaderBytes + kEntryChecksumBytes) {
    return fail(fmt::format("truncated: {} bytes, shorter than any entry header", bytes.size()));
  }
  if (bytes.substr(0, sizeof(kEntryMagic)) != std::string_view(kEntryMagic, sizeof(kEntryMagic))) {
    return fail("not a kdsl cache entry (bad magic number)");
  }
  uint64_t version = get_le(bytes, 8, 4);
  if (version != kCacheFormatVersion) {
    return fail(fmt::format("format version {}, expected {}", version, kCacheFormatVersion));
  }
  const uint64_t key_len = get_le(bytes, 16, 8);
  const uint64_t meta_len = get_le(bytes, 24, 8);
  const uint64_t payload_len = get_le(bytes, 32, 8);
  const uint64_t available = bytes.size() - kEntryFixedHeaderBytes - kEntryChecksumBytes;
  if (key_len > available || meta_len > available - key_len ||
      payload_len != available - key_len - meta_len) {
    return fail(
        fmt::format("truncated or corrupt: header announces {} + {} + {} bytes, the file "
                    "holds {} after the fixed header",
                    key_len, meta_len, payload_len, available));
  }
  const size_t header_end = kEntryFixedHeaderBytes + key_len + meta_len;
  if (xxh128_raw(bytes.substr(0, header_end)) != bytes.substr(header_end, kEntryChecksumBytes)) {
    return fail("header checksum mismatch");
  }
  EntryFile entry;
  entry.key = bytes.substr(kEntryFixedHeaderBytes, key_len);
  entry.meta = bytes.substr(kEntryFixedHeaderBytes + key_len, meta_len);
  entry.payload = bytes.substr(header_end + kEntryChecksumBytes);
  if (xxh128_raw(entry.payload) != bytes.substr(40, kEntryChecksumBytes)) {
    return fail("payload checksum mismatch");
  }
  return entry;
}

CacheFaults CacheFaults::parse(std::string_view list, std::vector<std::string>* unknown) {
  CacheFaults f;
  while (!list.empty()) {
    size_t comma = list.find(',');
    const std::string item = trim_blanks(std::string(list.substr(0, comma)));
    const std::string word = env_word(item);
    bool* flag = word == "read"     ? &f.read
                 : word == "write"  ? &f.write
                 : word == "rename" ? &f.rename
                 : word == "lock"   ? &f.lock
                                    : nullptr;
    if (flag != nullptr) {
      *flag = true;
    } else if (!item.empty() && unknown != nullptr) {
      unknown->push_back(item);
    }
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return f;
}

ReadResult read_entry(const std::filesystem::path& path, const CacheFaults& faults) {
  ReadResult r;
  // O_NONBLOCK: a FIFO put in an entry's place must not block the open (regular files ignore it).
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    const int err = errno;
    // (Found by user testing: a link that loops was an I/O error, "compiling in memory instead",
    // and then replaced anyway.)
    if (std::string what = not_an_entry(path, err); !what.empty()) {
      r.status = ReadResult::kDamaged;
      r.problem = std::move(what);
      return r;
    }
    if (err == ENOENT) return r;  // kMissing
    r.status = ReadResult::kIoError;
    r.problem = fmt::format("cannot open {}: {}", path.string(), errno_text(err));
    return r;
  }
  struct stat st {};
  int err = ::fstat(fd.get(), &st) != 0 ? errno : 0;
  if (err == 0 && !S_ISREG(st.st_mode)) {
    r.status = ReadResult::kDamaged;
    r.problem = "not a regular file";
    return r;
  }
  std::string bytes;
  if (err == 0 && faults.read) err = EIO;
  if (err == 0 && static_cast<uint64_t>(st.st_size) > kMaxEntryBytes) {
    r.status = ReadResult::kDamaged;
    r.problem = fmt::format("{} bytes, larger than any entry kdsl writes", st.st_size);
    return r;
  }
  // The magic number first: a large foreign file in the entry's place is not read whole.
  char magic[sizeof(kEntryMagic)] = {};
  if (err == 0 && static_cast<uint64_t>(st.st_size) >= sizeof(kEntryMagic)) {
    const ssize_t n = ::pread(fd.get(), magic, sizeof(magic), 0);
    if (n < 0) err = errno;
    if (n == static_cast<ssize_t>(sizeof(magic)) &&
        std::string_view(magic, sizeof(magic)) !=
            std::string_view(kEntryMagic, sizeof(kEntryMagic))) {
      r.status = ReadResult::kDamaged;
      r.problem = "not a kdsl cache entry (bad magic number)";
      return r;
    }
  }
  if (err == 0) err = read_all(fd.get(), static_cast<size_t>(st.st_size), &bytes);
  if (err != 0) {
    r.status = ReadResult::kIoError;
    r.problem = fmt::format("cannot read {}: {}", path.string(), errno_text(err));
    return r;
  }
  std::optional<EntryFile> entry = decode_entry(bytes, &r.problem);
  if (!entry) {
    r.status = ReadResult::kDamaged;
    return r;
  }
  ::futimens(fd.get(), nullptr);  // last use = now; a read-only cache keeps its old times
  r.status = ReadResult::kOk;
  r.entry = std::move(*entry);
  return r;
}

std::optional<std::string> read_entry_key(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string fixed;
  if (read_all(fd.get(), kEntryFixedHeaderBytes, &fixed) != 0 ||
      fixed.size() != kEntryFixedHeaderBytes ||
      std::string_view(fixed).substr(0, sizeof(kEntryMagic)) !=
          std::string_view(kEntryMagic, sizeof(kEntryMagic))) {
    return std::nullopt;
  }
  const uint64_t key_len = get_le(fixed, 16, 8);
  if (key_len > (uint64_t{1} << 30)) return std::nullopt;
  std::string key;
  if (read_all(fd.get(), key_len, &key) != 0 || key.size() != key_len) return std::nullopt;
  return key;
}

std::string write_file_atomic(const std::filesystem::path& path, std::string_view bytes,
                              const CacheFaults& faults) {
  const std::string temp = temp_path_for(path);
  int raw = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (raw < 0 && errno == ENOENT && ::mkdir(path.parent_path().c_str(), 0700) == 0) {
    raw = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);  // (a clear)
  }
  Fd fd(raw);
  if (fd.get() < 0) return fmt::format("cannot create {}: {}", temp, errno_text(errno));
  int err = faults.write ? ENOSPC : write_all(fd.get(), bytes);
  if (err == 0 && ::fsync(fd.get()) != 0) err = errno;
  if (err == 0 && ::close(fd.release()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    return fmt::format("cannot write {}: {}", temp, errno_text(err));
  }
  err = faults.rename ? EACCES : (::rename(temp.c_str(), path.c_str()) != 0 ? errno : 0);
  if (err != 0) {
    ::unlink(temp.c_str());
    return fmt::format("cannot rename {} to {}: {}", temp, path.string(), errno_text(err));
  }
  return {};
}

namespace {

constexpr size_t kEntryNameHexDigits = 30;  // the key's 32 less the shard folder's 2

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_lower_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f');
}

// Whether `text` is one or more characters, each satisfying `is`.
bool all_of_nonempty(std::string_view text, bool (*is)(char)) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is);
}

// The length of the entry name `name` starts with, or 0 when it does not start with one.
size_t entry_name_prefix(std::string_view name) {
  const std::string_view suffix = kEntrySuffix;
  const size_t n = kEntryNameHexDigits + suffix.size();
  const bool ok = name.size() >= n &&
                  is_key_hex(name.substr(0, kEntryNameHexDigits), kEntryNameHexDigits) &&
                  name.substr(kEntryNameHexDigits, suffix.size()) == suffix;
  return ok ? n : 0;
}

}  // namespace

bool is_key_hex(std::string_view text, size_t digits) {
  return text.size() == digits && all_of_nonempty(text, is_lower_hex);
}

bool is_entry_file_name(std::string_view name) {
  const size_t n = entry_name_prefix(name);
  return n != 0 && n == name.size();
}

bool is_temp_file_name(std::string_view name) {
  // temp_path_for: "<entry>.tmp.<pid>.<counter>.<random, lowercase hex>".
  const size_t n = entry_name_prefix(name);
  if (n == 0 || !name.substr(n).starts_with(".tmp.")) return false;
  std::string_view rest = name.substr(n + 5);
  for (int part = 0; part < 2; ++part) {
    const size_t dot = rest.find('.');
    if (dot == std::string_view::npos || !all_of_nonempty(rest.substr(0, dot), is_digit)) {
      return false;
    }
    rest.remove_prefix(dot + 1);
  }
  return all_of_nonempty(rest, is_lower_hex);
}

bool is_lock_file_name(std::string_view name) {
  const size_t n = entry_name_prefix(name);
  return n != 0 && name.substr(n) == ".lock";
}

std::optional<EntryLock> EntryLock::acquire(const std::filesystem::path& lock_path,
                                            std::chrono::milliseconds timeout,
                                            const CacheFaults& faults, std::string* error,
                                            bool* timed_out) {
  if (faults.lock) {
    *error = fmt::format("cannot lock {}: {}", lock_path.string(), errno_text(ENOLCK));
    return std::nullopt;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(500);
  int retries = 0;  // of a removed link or shard folder: a few, then the error stands
  for (;;) {
    Fd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) {
      const int err = errno;
      if (err == ELOOP && retries++ < 3 && ::unlink(lock_path.c_str()) == 0) continue;  // a link
      if (err == ENOENT && retries++ < 3 && ::mkdir(lock_path.parent_path().c_str(), 0700) == 0) {
        continue;  // the shard folder was removed by a clear
      }
      *error = fmt::format("cannot create lock file {}: {}", lock_path.string(), errno_text(err));
      return std::nullopt;
    }
    while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        *error = fmt::format("cannot lock {}: {}", lock_path.string(), errno_text(errno));
        return std::nullopt;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        if (timed_out) *timed_out = true;
        *error = fmt::format(
            "timed out after {} ms waiting for the lock {} held by another "
            "process",
            timeout.count(), lock_path.string());
        return std::nullopt;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
    // The previous holder removes the lock file before unlocking it; if we locked a file that is
    // no longer (or not the one) at lock_path, open the new one and try again.
    struct stat held {};
    struct stat now {};
    if (::fstat(fd.get(), &held) == 0 && ::stat(lock_path.c_str(), &now) == 0 &&
        held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
      return EntryLock(lock_path, fd.release());
    }
  }
}

bool EntryLock::remove_if_free(const std::filesystem::path& lock_path) {
  Fd fd(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return false;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return false;  // held: a compile is running
  // Only the file this descriptor locked: a holder may have replaced it since the open.
  struct stat held {};
  struct stat now {};
  const bool same = ::fstat(fd.get(), &held) == 0 && ::lstat(lock_path.c_str(), &now) == 0 &&
                    held.st_ino == now.st_ino && held.st_dev == now.st_dev;
  return same && ::unlink(lock_path.c_str()) == 0;
}

EntryLock::EntryLock(EntryLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

EntryLock& EntryLock::operator=(EntryLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

EntryLock::~EntryLock() {
  release();
}

void EntryLock::release() noexcept {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still holding the lock, so no waiter keeps a stale file
  ::close(std::exchange(fd_, -1));
}

}  // namespace kdsl
