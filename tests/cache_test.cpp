// The disk cache in one process: keys, hits, damaged entries, I/O failures, trust, eviction.
// Multi-process behavior is in cache_process_test.cpp.
#include "src/cache.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "cache_test_util.h"
#include "kdsl/error.h"
#include "src/cache_file.h"
#include "src/nvrtc.h"

namespace kdsl {
namespace {
using namespace kdsl::testing;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A compile function that counts its calls.
struct FakeCompiler {
  CacheKeyInputs key;
  int calls = 0;
  std::function<std::string()> fn() {
    return [this] {
      ++calls;
      return fake_cubin(key);
    };
  }
};

// ----------------------------------------------------------------------------------------------
// Keys

TEST(CacheKey, CanonicalTextRoundTripsAndHashIsFullLength) {
  CacheKeyInputs k = test_key();
  std::string text = canonical_key(k);
  EXPECT_TRUE(text.starts_with("kdsl-cache-format 1\n1\n")) << text;
  auto back = parse_canonical_key(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, k);
  std::string hex = cache_key_hex(k);
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(parse_canonical_key(text.substr(0, text.size() - 1)).has_value());
  EXPECT_FALSE(parse_canonical_key(text + "x").has_value());
}

TEST(CacheKey, GoldenHashIsStable) {
  // Pins the serialization and the hash: if this changes, bump kCacheFormatVersion so old entries
  // are not misread, then update the value.
  EXPECT_EQ(cache_key_hex(test_key()), "7b627861494fe44b744ee1cf3ab4795a");
}

TEST(CacheKey, EveryInputChangesTheKey) {
  const std::string base = cache_key_hex(test_key());
  std::vector<std::function<void(CacheKeyInputs&)>> changes = {
      [](auto& k) { k.source += " "; },
      [](auto& k) { k.options.push_back("-lineinfo"); },
      [](auto& k) { std::swap(k.options[0], k.options[1]); },
      [](auto& k) { k.arch = "sm_90a"; },
      [](auto& k) { k.nvrtc_version = "13.1"; },
      [](auto& k) { k.kdsl_version = "0.1.1"; },
      [](auto& k) { k.kernel_symbol += "_"; },
      // Length prefixes keep field boundaries: joining two options is another key.
      [](auto& k) { k.options = {k.options[0] + k.options[1]}; },
      [](auto& k) { k.options = {k.options[0] + "\n" + k.options[1]}; },
  };
  std::set<std::string> seen = {base};
  for (size_t i = 0; i < changes.size(); ++i) {
    CacheKeyInputs k = test_key();
    changes[i](k);
    EXPECT_TRUE(seen.insert(cache_key_hex(k)).second) << "change " << i << " kept the key";
  }
}

TEST(CacheConfigTest, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("100"), 100u);
  EXPECT_EQ(parse_byte_size("10k"), 10u * 1024);
  EXPECT_EQ(parse_byte_size("512M"), 512u << 20);
  EXPECT_EQ(parse_byte_size("1G"), uint64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("2GiB"), uint64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("3GB"), uint64_t{3} << 30);
  EXPECT_EQ(parse_byte_size("1T"), uint64_t{1} << 40);
  EXPECT_EQ(parse_byte_size("0"), 0u);
  // Spaces around are ignored, as KDSL_CACHE's are (" 1G " was malformed).
  EXPECT_EQ(parse_byte_size(" 1G "), uint64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("\t512m\t"), 512u << 20);
  EXPECT_EQ(parse_byte_size(" 100 "), 100u);
  EXPECT_FALSE(parse_byte_size(" "));
  EXPECT_FALSE(parse_byte_size("1 G"));
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("G"));
  EXPECT_FALSE(parse_byte_size("12X"));
  EXPECT_FALSE(parse_byte_size("-1"));
  EXPECT_FALSE(parse_byte_size("99999999999T"));
  EXPECT_EQ(parse_byte_size("7B"), 7u);
  EXPECT_EQ(parse_byte_size("1kib"), 1024u);
  // A unit is one of B, K, KB, KiB, ... (found by a new-user test: "1BB" was 1 byte).
  EXPECT_FALSE(parse_byte_size("1BB"));
  EXPECT_FALSE(parse_byte_size("1iB"));
  EXPECT_FALSE(parse_byte_size("1KBB"));
  EXPECT_FALSE(parse_byte_size("1KK"));
}

TEST_F(CacheTest, ConfigFromEnvironment) {
  ScopedEnv cache("KDSL_CACHE", nullptr);
  ScopedEnv size("KDSL_CACHE_MAX_SIZE", nullptr);
  ScopedEnv fault("KDSL_CACHE_FAULT", nullptr);
  for (const char* unset : {static_cast<const char*>(nullptr), "", "  ", " \t "}) {
    ScopedEnv dir("KDSL_CACHE_DIR", unset);  // blanks are unset, not a directory named "  "
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg/cache");
    EXPECT_EQ(CacheConfig::from_env().dir, fs::path("/xdg/cache/kdsl"));
    ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(CacheConfig::from_env().dir, fs::path("/home/someone/.cache/kdsl"));
  }
  ScopedEnv dir("KDSL_CACHE_DIR", "/explicit/dir");
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg/cache");
  CacheConfig c = CacheConfig::from_env();
  EXPECT_EQ(c.dir, fs::path("/explicit/dir"));
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.max_bytes, uint64_t{1} << 30);
  {
    ScopedEnv off("KDSL_CACHE", "OFF");
    ScopedEnv max("KDSL_CACHE_MAX_SIZE", "64M");
    ScopedEnv faults("KDSL_CACHE_FAULT", "write,rename");
    c = CacheConfig::from_env();
    EXPECT_FALSE(c.enabled);
    EXPECT_EQ(c.max_bytes, uint64_t{64} << 20);
    EXPECT_TRUE(c.faults.write && c.faults.rename && !c.faults.read && !c.faults.lock);
  }
  {
    ScopedEnv spaced("KDSL_CACHE_MAX_SIZE", " 2g ");
    EXPECT_EQ(CacheConfig::from_env().max_bytes, uint64_t{2} << 30);
    ScopedEnv blank("KDSL_CACHE_MAX_SIZE", " ");  // as unset
    EXPECT_EQ(CacheConfig::from_env().max_bytes, uint64_t{1} << 30);
    EXPECT_TRUE(warnings().empty());
  }
  ScopedEnv bad("KDSL_CACHE_MAX_SIZE", "lots");
  EXPECT_EQ(CacheConfig::from_env().max_bytes, uint64_t{1} << 30);
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_NE(warnings()[0].find("KDSL_CACHE_MAX_SIZE='lots'"), std::string::npos);
}

// KDSL_CACHE: off, 0, false, no turn the cache off; on, 1, true, yes (and unset) leave it on, in
// any case and with spaces around; anything else warns once, naming those, and leaves it on.
TEST_F(CacheTest, KdslCacheSpellings) {
  for (const char* off : {"off", "OFF", "0", "false", "No", " off "}) {
    ScopedEnv env("KDSL_CACHE", off);
    EXPECT_FALSE(CacheConfig::from_env().enabled) << off;
  }
  for (const char* on : {"on", "ON", "1", "true", "yes", " Yes "}) {
    ScopedEnv env("KDSL_CACHE", on);
    EXPECT_TRUE(CacheConfig::from_env().enabled) << on;
  }
  EXPECT_TRUE(warnings().empty());
  ScopedEnv env("KDSL_CACHE", "disabled");
  EXPECT_TRUE(CacheConfig::from_env().enabled);
  EXPECT_TRUE(CacheConfig::from_env().enabled);
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_NE(warnings()[0].find("ignoring KDSL_CACHE='disabled': expected off (or 0, false, no) or "
                               "on (or 1, true, yes); the disk cache is on"),
            std::string::npos)
      << warnings()[0];
}

// KDSL_CACHE_FAULT: items in any case, spaces around ignored; an unknown one is warned about, named
// with the accepted ones, once per process (found by user testing: a misspelt fault was ignored
// in silence, so a test ran without the failure it meant to inject).
TEST_F(CacheTest, KdslCacheFaultUnknownItemsAreWarnedAbout) {
  {
    ScopedEnv env("KDSL_CACHE_FAULT", " Read , WRITE,rename,lock, ");
    const CacheFaults f = CacheConfig::from_env().faults;
    EXPECT_TRUE(f.read && f.write && f.rename && f.lock);
    EXPECT_TRUE(warnings().empty());
  }
  ScopedEnv env("KDSL_CACHE_FAULT", "read,wrte, bogus");
  const CacheFaults f = CacheConfig::from_env().faults;
  CacheConfig::from_env();  // no second warning
  EXPECT_TRUE(f.read && !f.write && !f.rename && !f.lock);
  const auto w = warnings();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0],
            "kdsl cache: ignoring 'wrte' in KDSL_CACHE_FAULT='read,wrte, bogus': expected a comma "
            "list of read, write, rename, lock (tests only)");
  EXPECT_NE(w[1].find("ignoring 'bogus' in KDSL_CACHE_FAULT="), std::string::npos) << w[1];
  std::vector<std::string> unknown;
  EXPECT_TRUE(CacheFaults::parse("lock,,x", &unknown).lock);
  EXPECT_EQ(unknown, std::vector<std::string>{"x"});
}

// ----------------------------------------------------------------------------------------------
// Hits and misses

TEST_F(CacheTest, MissThenHit) {
  DiskCache cache(config());
  FakeCompiler c{test_key()};
  CompiledEntry first = cache.get_or_compile(c.key, R"({"block":256})", c.fn());
  EXPECT_FALSE(first.hit);
  EXPECT_EQ(first.not_stored, "");
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(first.cubin, fake_cubin(c.key));
  EXPECT_EQ(first.key_hex, cache_key_hex(c.key));

  CompiledEntry second = cache.get_or_compile(c.key, R"({"block":256})", c.fn());
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.meta, R"({"block":256})");
  EXPECT_EQ(second.key_hex, first.key_hex);
  EXPECT_EQ(second.compile_ms, 0.0);

  // Exactly one file, at <dir>/<2 hex>/<30 hex>.kdslbin, no temporary or lock file left.
  fs::path expected =
      config().dir / first.key_hex.substr(0, 2) / (first.key_hex.substr(2) + ".kdslbin");
  EXPECT_EQ(cache.entry_path(first.key_hex), expected);
  EXPECT_EQ(all_files(config().dir), std::vector<fs::path>{expected});
  CacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, fs::file_size(expected));
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_TRUE(warnings().empty());
}

TEST_F(CacheTest, DirectoryIsCreatedPrivate) {
  CacheConfig cfg = config("a/b/cache");
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  cache.get_or_compile(c.key, "{}", c.fn());
  for (const fs::path& p : {cfg.dir, cfg.dir.parent_path(), cfg.dir.parent_path().parent_path()}) {
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << p;
  }
}

TEST_F(CacheTest, DifferentKeysAreDifferentEntries) {
  DiskCache cache(config());
  FakeCompiler a{test_key("kdsl_a", "sm_90")};
  FakeCompiler b{test_key("kdsl_a", "sm_90a")};
  EXPECT_NE(cache.get_or_compile(a.key, "{}", a.fn()).cubin,
            cache.get_or_compile(b.key, "{}", b.fn()).cubin);
  EXPECT_TRUE(cache.get_or_compile(a.key, "{}", a.fn()).hit);
  EXPECT_TRUE(cache.get_or_compile(b.key, "{}", b.fn()).hit);
  EXPECT_EQ(a.calls + b.calls, 2);
  auto entries = cache.list();
  ASSERT_EQ(entries.size(), 2u);
  std::set<std::string> archs;
  for (const auto& e : entries) {
    EXPECT_EQ(e.kernel_symbol, "kdsl_a");
    EXPECT_EQ(e.bytes, fs::file_size(e.path));
    EXPECT_EQ(e.path, cache.entry_path(e.key_hex));
    archs.insert(e.arch);
  }
  EXPECT_EQ(archs, (std::set<std::string>{"sm_90", "sm_90a"}));
}

TEST_F(CacheTest, ThreadsAskingForOneKeyCompileOnce) {
  DiskCache cache(config());
  CacheKeyInputs key = test_key();
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto e = cache.get_or_compile(key, "{}", [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return fake_cubin(key);
      });
      if (e.cubin == fake_cubin(key)) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(all_files(config().dir).size(), 1u);
}

TEST_F(CacheTest, RealNvrtcCubinMissThenHit) {
  DiskCache cache(config());
  CacheKeyInputs key = test_key("kdsl_test_fill", "sm_90");
  key.options = nvrtc_options(key.arch, {});
  key.nvrtc_version = nvrtc_version();
  int calls = 0;
  auto compile = [&] {
    ++calls;
    return nvrtc_compile(key.source, key.kernel_symbol, key.arch, {}).data;
  };
  CompiledEntry miss = cache.get_or_compile(key, "{}", compile);
  CompiledEntry hit = cache.get_or_compile(key, "{}", compile);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(miss.hit);
  EXPECT_GT(miss.compile_ms, 0.0);
  EXPECT_TRUE(hit.hit);
  EXPECT_EQ(hit.cubin, miss.cubin);
  EXPECT_EQ(hit.cubin.substr(0, 4),
            "\x7f"
            "ELF");
}

// ----------------------------------------------------------------------------------------------
// Compile errors

TEST_F(CacheTest, CompileErrorIsNotCachedAndReportedIdentically) {
  DiskCache cache(config());
  CacheKeyInputs key = test_key("kdsl_test_broken", "sm_90");
  key.source = "extern \"C\" __global__ void kdsl_test_broken() { int x = ; }\n";
  int calls = 0;
  auto compile = [&] {
    ++calls;
    return nvrtc_compile(key.source, key.kernel_symbol, key.arch, {}).data;
  };
  std::vector<std::string> messages;
  for (int i = 0; i < 2; ++i) {
    try {
      cache.get_or_compile(key, "{}", compile);
      ADD_FAILURE() << "expected CompileError";
    } catch (const CompileError& e) {
      messages.push_back(e.what());
    }
  }
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_NE(messages[0].find("kdsl_test_broken"), std::string::npos);
  EXPECT_EQ(calls, 2);                           // compiled again, not served from the cache
  EXPECT_TRUE(all_files(config().dir).empty());  // no entry, no lock file left
  EXPECT_EQ(cache.stats().hits, 0u);
}

// ----------------------------------------------------------------------------------------------
// Damaged entries: each is detected, removed and rebuilt with one warning.

class DamagedEntryTest : public CacheTest {
 protected:
  // Stores a valid entry for key(), damages its file with `damage`, asks again and checks that the
  // entry was rebuilt with exactly one warning containing `expected` (when not empty).
  void expect_rebuilt(const std::function<void(const fs::path&)>& damage,
                      const std::string& expected) {
    DiskCache cache(config());
    FakeCompiler c{test_key()};
    CompiledEntry first = cache.get_or_compile(c.key, "{\"meta\":1}", c.fn());
    const fs::path path = cache.entry_path(first.key_hex);
    damage(path);

    const size_t before = warnings().size();
    CompiledEntry again = cache.get_or_compile(c.key, "{\"meta\":1}", c.fn());
    EXPECT_FALSE(again.hit);
    EXPECT_EQ(c.calls, 2);
    EXPECT_EQ(again.cubin, fake_cubin(c.key));
    auto w = warnings();
    ASSERT_EQ(w.size(), before + 1) << "expected exactly one warning";
    EXPECT_NE(w.back().find(path.string()), std::string::npos) << w.back();
    EXPECT_NE(w.back().find(c.key.kernel_symbol), std::string::npos) << w.back();
    if (!expected.empty()) {
      EXPECT_NE(w.back().find(expected), std::string::npos) << w.back();
    }

    // Rebuilt: the next request is a hit from a valid file, with no new warning.
    CompiledEntry third = cache.get_or_compile(c.key, "{\"meta\":1}", c.fn());
    EXPECT_TRUE(third.hit);
    EXPECT_EQ(third.cubin, fake_cubin(c.key));
    EXPECT_EQ(third.meta, "{\"meta\":1}");
    EXPECT_EQ(c.calls, 2);
    EXPECT_EQ(warnings().size(), before + 1);
  }

  // Stores `other` in the same cache directory and returns its file.
  fs::path store_other(const CacheKeyInputs& other) {
    DiskCache cache(config());
    FakeCompiler c{other};
    return cache.entry_path(cache.get_or_compile(other, "{}", c.fn()).key_hex);
  }
};

TEST_F(DamagedEntryTest, Truncated) {
  expect_rebuilt([](const fs::path& p) { fs::resize_file(p, fs::file_size(p) / 2); }, "truncated");
}

TEST_F(DamagedEntryTest, TruncatedInsideTheHeader) {
  expect_rebuilt([](const fs::path& p) { fs::resize_file(p, 30); }, "truncated");
}

TEST_F(DamagedEntryTest, Empty) {
  expect_rebuilt([](const fs::path& p) { fs::resize_file(p, 0); }, "truncated");
}

TEST_F(DamagedEntryTest, FlippedPayloadByte) {
  expect_rebuilt(
      [](const fs::path& p) {
        std::string bytes = read_file(p);
        bytes[bytes.size() - 100] ^= 0x01;
        write_file(p, bytes);
      },
      "payload checksum mismatch");
}

TEST_F(DamagedEntryTest, FlippedHeaderByteAnywhere) {
  // Every byte of the header matters: magic, version, lengths, checksum, key text, metadata and
  // the header checksum itself.
  const std::string canonical = canonical_key(test_key());
  const size_t key_end = 56 + canonical.size();
  const size_t meta_end = key_end + std::string("{\"meta\":1}").size();
  for (size_t offset : {size_t{0}, size_t{9}, size_t{17}, size_t{26}, size_t{33}, size_t{41},
                        size_t{60}, key_end - 2, key_end + 1, meta_end + 5}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    DiskCache(config()).clear();
    expect_rebuilt(
        [offset](const fs::path& p) {
          std::string bytes = read_file(p);
          bytes[offset] ^= 0x10;
          write_file(p, bytes);
        },
        "");
  }
}

TEST_F(DamagedEntryTest, FlippedMetadataByteIsAHeaderChecksumMismatch) {
  const size_t meta_start = 56 + canonical_key(test_key()).size();
  expect_rebuilt(
      [meta_start](const fs::path& p) {
        std::string bytes = read_file(p);
        bytes[meta_start + 3] ^= 0x01;
        write_file(p, bytes);
      },
      "header checksum mismatch");
}

// A FIFO in an entry's place (opening it for reading would block until a writer came) is a
// damaged entry, replaced by the rebuilt file.
TEST_F(DamagedEntryTest, FifoInPlaceOfTheEntry) {
  expect_rebuilt(
      [](const fs::path& p) {
        fs::remove(p);
        ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p;
      },
      "not a regular file");
}

// A socket in an entry's place (opening it fails with ENXIO) is "not a regular file", as
// docs/cache.md says: removed and replaced, with the warning that says so (it was an I/O error,
// "compiling in memory instead", and then replaced anyway).
TEST_F(DamagedEntryTest, SocketInPlaceOfTheEntry) {
  sockaddr_un addr{};
  const std::string path = DiskCache(config()).entry_path(cache_key_hex(test_key())).string();
  if (path.size() >= sizeof(addr.sun_path)) GTEST_SKIP() << "path too long for a socket: " << path;
  int fd = -1;
  expect_rebuilt(
      [&](const fs::path& p) {
        fs::remove(p);
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, p.c_str(), sizeof(addr.sun_path) - 1);
        fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0) << p;
      },
      "): not a regular file; compiling it again");
  ::close(fd);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path)));
}

// A symbolic link that loops in an entry's place is a damaged entry: the link is removed and a
// real file stored, with the warning that says so (found by user testing: the warning said the
// kernel was compiled "in memory instead", and it was stored anyway).
TEST_F(DamagedEntryTest, SymbolicLinkLoopInPlaceOfTheEntry) {
  fs::path entry;
  expect_rebuilt(
      [&](const fs::path& p) {
        entry = p;
        fs::remove(p);
        fs::create_symlink(p.filename(), p);
      },
      "): a symbolic link that loops; compiling it again");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(entry)));
  for (const std::string& w : warnings()) {
    EXPECT_EQ(w.find("in memory"), std::string::npos) << w;
  }
}

// A symbolic link to nothing in an entry's place is replaced with the warning docs/cache.md gives
// for damaged entries (found by user testing: it was replaced silently), and its target is not
// made.
TEST_F(DamagedEntryTest, DanglingSymbolicLinkInPlaceOfTheEntry) {
  const fs::path target = root_ / "missing";
  fs::path entry;
  expect_rebuilt(
      [&](const fs::path& p) {
        entry = p;
        fs::remove(p);
        fs::create_symlink(target, p);
      },
      "): a symbolic link to " + target.string() + ", which does not exist; compiling it again");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(entry)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(target)));
}

// An empty directory in the entry's place holds nothing of anyone's: removed, and the entry
// rebuilt, with one warning that says what was removed.
TEST_F(DamagedEntryTest, EmptyDirectoryInPlaceOfTheEntry) {
  expect_rebuilt(
      [](const fs::path& p) {
        fs::remove(p);
        fs::create_directory(p);
      },
      "): an empty directory; compiling it again");
}

// A directory with files in the entry's place is not kdsl's to delete: it is left as it is, the
// kernel compiled and not stored, with one warning that says so (not "removed" and then "cannot
// remove").
TEST_F(DamagedEntryTest, DirectoryWithFilesInPlaceOfTheEntryIsLeftAlone) {
  DiskCache cache(config());
  FakeCompiler c{test_key()};
  const fs::path path = cache.entry_path(cache.get_or_compile(c.key, "{}", c.fn()).key_hex);
  fs::remove(path);
  fs::create_directory(path);
  write_file(path / "notes.txt", "someone's data");
  for (int run = 1; run <= 2; ++run) {
    const size_t before = warnings().size();
    CompiledEntry e = cache.get_or_compile(c.key, "{}", c.fn());
    EXPECT_FALSE(e.hit);
    EXPECT_EQ(e.cubin, fake_cubin(c.key));
    EXPECT_EQ(c.calls, 1 + run);
    EXPECT_NE(e.not_stored.find("is a directory that is not empty"), std::string::npos)
        << e.not_stored;
    auto w = warnings();
    ASSERT_EQ(w.size(), before + 1) << "expected exactly one warning";
    EXPECT_NE(w.back().find(path.string() + " for kernel '" + c.key.kernel_symbol +
                            "' (sm_90) is a directory that is not empty; it is left in place"),
              std::string::npos)
        << w.back();
    EXPECT_EQ(w.back().find("removed"), std::string::npos) << w.back();
    EXPECT_EQ(read_file(path / "notes.txt"), "someone's data");
  }
}

TEST_F(DamagedEntryTest, GarbageFile) {
  expect_rebuilt([](const fs::path& p) { write_file(p, std::string(5000, 'x')); }, "bad magic");
}

TEST_F(DamagedEntryTest, EntrySwappedWithAnotherKernelsFile) {
  fs::path other = store_other(test_key("kdsl_other_kernel"));
  expect_rebuilt(
      [&](const fs::path& p) { fs::copy_file(other, p, fs::copy_options::overwrite_existing); },
      "holds kernel 'kdsl_other_kernel'");
}

TEST_F(DamagedEntryTest, EntryForAnotherArchitecture) {
  CacheKeyInputs other = test_key();
  other.arch = "sm_80";  // same source, symbol and options: only the architecture differs
  fs::path other_path = store_other(other);
  expect_rebuilt(
      [&](const fs::path& p) {
        fs::copy_file(other_path, p, fs::copy_options::overwrite_existing);
      },
      "built for sm_80, not sm_90");
}

// ----------------------------------------------------------------------------------------------
// I/O failures: a warning (once) and a working result.

TEST_F(CacheTest, ReadOnlyDirectoryCompilesInMemory) {
  CacheConfig cfg = config();
  FakeCompiler old{test_key("kdsl_old")};
  { DiskCache(cfg).get_or_compile(old.key, "{}", old.fn()); }
  for (const auto& p : fs::recursive_directory_iterator(cfg.dir)) {
    if (p.is_directory()) ::chmod(p.path().c_str(), 0500);
  }
  ::chmod(cfg.dir.c_str(), 0500);
  // As root, permissions do not stop writes: inject the failure instead.
  fs::path probe = cfg.dir / "probe";
  int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY, 0600);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
    cfg.faults.lock = true;
    cfg.faults.write = true;
  }
  DiskCache cache(cfg);
  // Entries already there are still used (a read-only, precompiled cache).
  EXPECT_TRUE(cache.get_or_compile(old.key, "{}", old.fn()).hit);
  FakeCompiler c{test_key("kdsl_new")};
  for (int i = 0; i < 3; ++i) {
    CompiledEntry e = cache.get_or_compile(c.key, "{}", c.fn());
    EXPECT_FALSE(e.hit);
    EXPECT_EQ(e.cubin, fake_cubin(c.key));
  }
  EXPECT_EQ(c.calls, 3);
  auto w = warnings();
  ASSERT_EQ(w.size(), 1u) << "warn once per process";
  EXPECT_NE(w[0].find("compiling in memory"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find(cfg.dir.string()), std::string::npos) << w[0];
}

TEST_F(CacheTest, MissingUncreatableDirectoryCompilesInMemory) {
  CacheConfig cfg = config();
  write_file(root_ / "file", "x");
  cfg.dir = root_ / "file" / "cache";  // a path under a regular file cannot be created
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  EXPECT_EQ(cache.get_or_compile(c.key, "{}", c.fn()).cubin, fake_cubin(c.key));
  EXPECT_EQ(cache.get_or_compile(c.key, "{}", c.fn()).cubin, fake_cubin(c.key));
  EXPECT_EQ(c.calls, 2);
  auto w = warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("cannot create"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("KDSL_CACHE_DIR"), std::string::npos) << w[0];
}

TEST_F(CacheTest, FullDiskOnWriteLeavesNothingBehind) {
  CacheConfig cfg = config();
  cfg.faults.write = true;
  DiskCache cache(cfg);
  FakeCompiler a{test_key("kdsl_a")};
  FakeCompiler b{test_key("kdsl_b")};
  EXPECT_EQ(cache.get_or_compile(a.key, "{}", a.fn()).cubin, fake_cubin(a.key));
  CompiledEntry eb = cache.get_or_compile(b.key, "{}", b.fn());
  EXPECT_EQ(eb.cubin, fake_cubin(b.key));
  // Each entry says it was not stored, and why (kdsl compile reports it).
  EXPECT_NE(eb.not_stored.find("No space left on device"), std::string::npos) << eb.not_stored;
  EXPECT_FALSE(cache.get_or_compile(a.key, "{}", a.fn()).hit);
  EXPECT_EQ(a.calls + b.calls, 3);
  auto w = warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("No space left on device"), std::string::npos) << w[0];
  EXPECT_TRUE(all_files(cfg.dir).empty()) << "no temporary, lock or entry file may remain";
}

TEST_F(CacheTest, RenameFailureLeavesNothingBehind) {
  CacheConfig cfg = config();
  cfg.faults.rename = true;
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  EXPECT_EQ(cache.get_or_compile(c.key, "{}", c.fn()).cubin, fake_cubin(c.key));
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_NE(warnings()[0].find("cannot rename"), std::string::npos) << warnings()[0];
  EXPECT_TRUE(all_files(cfg.dir).empty());
}

TEST_F(CacheTest, ReadFailureIsAMiss) {
  CacheConfig cfg = config();
  FakeCompiler c{test_key()};
  DiskCache(cfg).get_or_compile(c.key, "{}", c.fn());
  cfg.faults.read = true;
  DiskCache cache(cfg);
  CompiledEntry e = cache.get_or_compile(c.key, "{}", c.fn());
  EXPECT_FALSE(e.hit);
  EXPECT_EQ(e.cubin, fake_cubin(c.key));
  EXPECT_EQ(c.calls, 2);
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_NE(warnings()[0].find("Input/output error"), std::string::npos) << warnings()[0];
  EXPECT_EQ(files_ending(cfg.dir, ".kdslbin").size(), 1u);  // the entry is not deleted
}

TEST_F(CacheTest, LockFailureStillWorks) {
  CacheConfig cfg = config();
  cfg.faults.lock = true;
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  EXPECT_FALSE(cache.get_or_compile(c.key, "{}", c.fn()).hit);
  EXPECT_TRUE(cache.get_or_compile(c.key, "{}", c.fn()).hit);
  EXPECT_TRUE(warnings().empty());
}

// `stats` says whether compiled kernels can be stored, as a compile finds out (found by user
// testing: it said "on" for KDSL_CACHE_DIR=/proc/self/x, where every kernel stays in memory).
// Finding out creates nothing: not the directory, nor anything in it or its parents.
TEST_F(CacheTest, StatsSaysWhetherCompiledKernelsCanBeStored) {
  struct Case {
    CacheConfig cfg;
    std::string reason;  // "" when writable
  };
  std::vector<Case> cases;
  cases.push_back({config("not_yet/sub"), ""});
  CacheConfig proc = config();
  proc.dir = "/proc/self/kdsl-cache";  // mkdir fails there, even for root
  cases.push_back({proc, "cannot create /proc/self/kdsl-cache: No such file or directory"});
  CacheConfig faulty = config("faulty");
  faulty.faults.write = true;
  fs::create_directories(faulty.dir);
  cases.push_back({faulty, "every store fails (KDSL_CACHE_FAULT=write)"});
  if (::geteuid() != 0) {  // permissions do not stop root
    CacheConfig under = config("ro/cache");
    fs::create_directories(root_ / "ro");
    ::chmod((root_ / "ro").c_str(), 0500);
    cases.push_back({under, "cannot create " + under.dir.string() + ": Permission denied"});
    CacheConfig existing = config("ro_existing");
    fs::create_directories(existing.dir);
    ::chmod(existing.dir.c_str(), 0500);
    cases.push_back({existing, "cannot write in " + existing.dir.string() + ": Permission denied"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cfg.dir.string());
    const bool existed = fs::exists(c.cfg.dir);
    const auto files_before = all_files(root_).size();
    DiskCache cache(c.cfg);
    CacheStats s = cache.stats();
    EXPECT_EQ(s.unusable, "");
    EXPECT_EQ(s.unwritable, c.reason);
    EXPECT_EQ(fs::exists(c.cfg.dir), existed) << "stats made the directory";
    EXPECT_EQ(all_files(root_).size(), files_before);
    std::error_code ec;
    for (const auto& p : fs::recursive_directory_iterator(root_, ec)) {
      EXPECT_EQ(p.path().filename().string().find("probe"), std::string::npos) << p.path();
    }
    // What a compile then does.
    FakeCompiler f{test_key()};
    CompiledEntry e = cache.get_or_compile(f.key, "{}", f.fn());
    EXPECT_EQ(e.not_stored.empty(), c.reason.empty()) << e.not_stored;
  }
  // The same words as the compile's.
  FakeCompiler f{test_key()};
  EXPECT_EQ(DiskCache(proc).get_or_compile(f.key, "{}", f.fn()).not_stored, cases[1].reason);
}

// ----------------------------------------------------------------------------------------------
// Trust

TEST_F(CacheTest, GroupWritableDirectoryIsNotTrusted) {
  CacheConfig cfg = config();
  fs::create_directories(cfg.dir);
  ::chmod(cfg.dir.c_str(), 0770);
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  EXPECT_EQ(cache.get_or_compile(c.key, "{}", c.fn()).cubin, fake_cubin(c.key));
  CompiledEntry again = cache.get_or_compile(c.key, "{}", c.fn());
  EXPECT_FALSE(again.hit);
  EXPECT_NE(again.not_stored.find("writable by group or others"), std::string::npos)
      << again.not_stored;
  EXPECT_EQ(c.calls, 2);
  EXPECT_TRUE(all_files(cfg.dir).empty()) << "nothing may be read from or written to it";
  auto w = warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("writable by group or others (mode 0770)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("chmod go-w"), std::string::npos) << w[0];
  EXPECT_NE(cache.stats().unusable, "");
}

TEST_F(CacheTest, PlantedEntryInAnUntrustedDirectoryIsNotLoaded) {
  CacheConfig cfg = config();
  FakeCompiler c{test_key()};
  DiskCache(cfg).get_or_compile(c.key, "{}", c.fn());  // a valid entry, as an attacker could plant
  ::chmod(cfg.dir.c_str(), 0777);
  DiskCache cache(cfg);
  EXPECT_FALSE(cache.get_or_compile(c.key, "{}", c.fn()).hit);
  EXPECT_EQ(c.calls, 2);
}

// The shard directories (DIR/xx) are checked as the cache directory is: an entry in one that
// others can write to, or in a symbolic link, is neither loaded nor replaced (found by a new-user
// test: only the top directory was checked).
TEST_F(CacheTest, PlantedEntryInAnUntrustedShardIsNotLoaded) {
  CacheConfig cfg = config();
  FakeCompiler c{test_key()};
  const CompiledEntry first = DiskCache(cfg).get_or_compile(c.key, "{}", c.fn());
  const fs::path entry = DiskCache(cfg).entry_path(first.key_hex), shard = entry.parent_path();
  const auto before = fs::last_write_time(entry);
  ::chmod(shard.c_str(), 0777);
  DiskCache cache(cfg);
  CompiledEntry again = cache.get_or_compile(c.key, "{}", c.fn());
  EXPECT_FALSE(again.hit);
  EXPECT_EQ(c.calls, 2);
  EXPECT_NE(again.not_stored.find("is writable by group or others (mode 0777)"), std::string::npos)
      << again.not_stored;
  EXPECT_EQ(fs::last_write_time(entry), before) << "the entry was replaced";
  auto w = warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("not using the entries of " + shard.string()), std::string::npos) << w[0];
  // A shard that is a symbolic link (to a directory of the same user) is not used either.
  ::chmod(shard.c_str(), 0700);
  const fs::path elsewhere = cfg.dir.parent_path() / "elsewhere";
  fs::rename(shard, elsewhere);
  fs::create_directory_symlink(elsewhere, shard);
  EXPECT_FALSE(DiskCache(cfg).get_or_compile(c.key, "{}", c.fn()).hit);
  EXPECT_EQ(c.calls, 3);
}

// The entries of a shard folder the cache does not trust (writable by others, another user's, a
// symbolic link) are neither counted, listed, evicted nor removed, as they are neither loaded nor
// replaced; stats names the folder and why (found by user testing: stats and list counted and
// showed them, and clear removed a linked folder's entries through the link).
TEST_F(CacheTest, EntriesOfUntrustedShardsAreNeitherCountedListedNorRemoved) {
  CacheConfig cfg = config();
  DiskCache cache(cfg);
  FakeCompiler a{test_key("kdsl_a")};
  const fs::path entry_a = cache.entry_path(cache.get_or_compile(a.key, "{}", a.fn()).key_hex);
  FakeCompiler b{test_key("kdsl_b")};
  for (int i = 0; cache_key_hex(b.key).substr(0, 2) == entry_a.parent_path().filename(); ++i) {
    b.key = test_key("kdsl_b" + std::to_string(i));  // another shard than a's
  }
  const fs::path entry_b = cache.entry_path(cache.get_or_compile(b.key, "{}", b.fn()).key_hex);
  const fs::path shard = entry_b.parent_path();
  auto expect_only_a = [&](const std::string& reason) {
    CacheStats s = cache.stats();
    EXPECT_EQ(s.entries, fs::exists(entry_a) ? 1u : 0u);
    EXPECT_EQ(s.bytes, fs::exists(entry_a) ? fs::file_size(entry_a) : 0u);
    ASSERT_EQ(s.untrusted.size(), 1u);
    EXPECT_EQ(s.untrusted[0].path, shard);
    EXPECT_EQ(s.untrusted[0].entries, 1u);
    EXPECT_NE(s.untrusted[0].reason.find(shard.string() + reason), std::string::npos)
        << s.untrusted[0].reason;
    EXPECT_EQ(cache.untrusted_shards().size(), 1u);
    for (const CacheEntryInfo& e : cache.list()) EXPECT_EQ(e.path, entry_a);
    CacheConfig tiny = cfg;
    tiny.max_bytes = 1;
    // (Whether a is there, read before prune removes it: the operands of EXPECT_EQ are evaluated
    // in an unspecified order, and clang evaluated prune first.)
    const size_t a_there = fs::exists(entry_a) ? 1u : 0u;
    EXPECT_EQ(DiskCache(tiny).prune().entries, a_there);
    EXPECT_TRUE(fs::exists(entry_b)) << "pruned";
    DiskCache(cfg).get_or_compile(a.key, "{}", a.fn());
    EXPECT_EQ(cache.clear().entries, 1u);
    EXPECT_TRUE(fs::exists(entry_b)) << "cleared";
    EXPECT_FALSE(DiskCache(cfg).get_or_compile(b.key, "{}", b.fn()).hit) << "loaded";
  };
  ::chmod(shard.c_str(), 0777);
  expect_only_a(" is writable by group or others (mode 0777)");
  ::chmod(shard.c_str(), 0700);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(shard.c_str(), 12345, 12345), 0);
    expect_only_a(" is owned by user id 12345");
    ASSERT_EQ(::chown(shard.c_str(), 0, 0), 0);
  }
  // A symbolic link in the shard's place: not followed, not removed.
  const fs::path elsewhere = root_ / "elsewhere";
  fs::rename(shard, elsewhere);
  fs::create_directory_symlink(elsewhere, shard);
  expect_only_a(" is a symbolic link");
  EXPECT_TRUE(fs::is_symlink(shard));
  EXPECT_TRUE(fs::exists(elsewhere / entry_b.filename()));
}

TEST_F(CacheTest, DirectoryOwnedByAnotherUserIsNotTrusted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  CacheConfig cfg = config();
  fs::create_directories(cfg.dir);
  ::chmod(cfg.dir.c_str(), 0700);
  ASSERT_EQ(::chown(cfg.dir.c_str(), 12345, 12345), 0);
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  EXPECT_EQ(cache.get_or_compile(c.key, "{}", c.fn()).cubin, fake_cubin(c.key));
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_NE(warnings()[0].find("owned by user id 12345"), std::string::npos) << warnings()[0];
}

TEST_F(CacheTest, CacheOffNeverTouchesTheDisk) {
  ScopedEnv dir("KDSL_CACHE_DIR", config().dir.c_str());
  ScopedEnv off("KDSL_CACHE", "off");
  DiskCache cache(CacheConfig::from_env());
  FakeCompiler c{test_key()};
  EXPECT_FALSE(cache.get_or_compile(c.key, "{}", c.fn()).hit);
  CompiledEntry again = cache.get_or_compile(c.key, "{}", c.fn());
  EXPECT_FALSE(again.hit);
  EXPECT_EQ(again.not_stored, "the disk cache is off (KDSL_CACHE)");
  EXPECT_EQ(c.calls, 2);
  EXPECT_FALSE(fs::exists(config().dir));
  EXPECT_TRUE(cache.list().empty());
  EXPECT_EQ(cache.clear().entries, 0u);
  EXPECT_EQ(cache.prune().entries, 0u);
  CacheStats s = cache.stats();
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_FALSE(fs::exists(config().dir));
  EXPECT_TRUE(warnings().empty());
}

// ----------------------------------------------------------------------------------------------
// Size limit and management

TEST_F(CacheTest, LeastRecentlyUsedEntriesAreEvicted) {
  CacheConfig cfg = config();
  auto key = [](int i) { return test_key("kdsl_k" + std::to_string(i)); };
  auto store = [&](DiskCache& cache, int i, int age_s) {
    FakeCompiler c{key(i)};
    auto e = cache.get_or_compile(c.key, "{}", c.fn());
    fs::last_write_time(cache.entry_path(e.key_hex),
                        fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
    return e;
  };
  uint64_t entry_bytes = 0;
  {
    DiskCache probe(config("probe"));
    auto e = store(probe, 0, 0);
    entry_bytes = fs::file_size(probe.entry_path(e.key_hex));
  }
  cfg.max_bytes = 3 * entry_bytes + entry_bytes / 2;  // room for three entries
  DiskCache cache(cfg);
  for (int i = 0; i < 5; ++i) store(cache, i, 100 - i);
  auto names = [&] {
    std::set<std::string> out;
    for (const auto& e : cache.list()) out.insert(e.kernel_symbol);
    return out;
  };
  EXPECT_EQ(names(), (std::set<std::string>{"kdsl_k2", "kdsl_k3", "kdsl_k4"}));
  // A hit makes k2 the most recently used, so storing k5 evicts k3.
  FakeCompiler k2{key(2)};
  EXPECT_TRUE(cache.get_or_compile(k2.key, "{}", k2.fn()).hit);
  store(cache, 5, 0);
  EXPECT_EQ(names(), (std::set<std::string>{"kdsl_k2", "kdsl_k4", "kdsl_k5"}));
  EXPECT_LE(cache.stats().bytes, cfg.max_bytes);
  EXPECT_EQ(cache.list().front().kernel_symbol, "kdsl_k5");  // most recent first

  // prune() to a smaller limit keeps the newest.
  CacheConfig small = cfg;
  small.max_bytes = entry_bytes;
  CacheRemoval removed = DiskCache(small).prune();
  EXPECT_EQ(removed.entries, 2u);
  EXPECT_EQ(removed.bytes, 2 * entry_bytes);
  auto left = cache.list();
  ASSERT_EQ(left.size(), 1u);

  EXPECT_EQ(cache.clear().entries, 1u);
  EXPECT_TRUE(all_files(cfg.dir).empty());
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(CacheTest, PruneRemovesAbandonedTemporaryFiles) {
  CacheConfig cfg = config();
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  fs::path entry = cache.entry_path(cache.get_or_compile(c.key, "{}", c.fn()).key_hex);
  fs::path old_temp = fs::path(entry) += ".tmp.1.0.abc";
  fs::path new_temp = fs::path(entry) += ".tmp.2.0.def";
  write_file(old_temp, "partial");
  write_file(new_temp, "partial");
  fs::last_write_time(old_temp, fs::file_time_type::clock::now() - std::chrono::hours(2));
  cache.prune();
  EXPECT_FALSE(fs::exists(old_temp));
  EXPECT_TRUE(fs::exists(new_temp)) << "a live writer's file is left alone";
  EXPECT_TRUE(fs::exists(entry));
  EXPECT_EQ(cache.stats().entries, 1u);  // temporary files are not entries
  EXPECT_EQ(cache.list().size(), 1u);
}

// Only regular files are entries: a directory named like an entry (or like a temporary file) is
// not counted, listed or removed, and its size (file_size fails on it) never shows as one.
TEST_F(CacheTest, DirectoriesNamedLikeEntriesAreNotEntries) {
  CacheConfig cfg = config();
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  fs::path entry = cache.entry_path(cache.get_or_compile(c.key, "{}", c.fn()).key_hex);
  const uint64_t entry_bytes = fs::file_size(entry);
  const fs::path stray = cfg.dir / "ab" / "0123456789abcdef0123456789abcd.kdslbin";
  const fs::path stray_temp = fs::path(entry) += ".tmp.1.0.abc";
  fs::create_directories(stray);
  fs::create_directories(stray_temp);
  fs::create_directories(cfg.dir / "ab" / "somedir");
  CacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, entry_bytes);
  auto entries = cache.list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].path, entry);
  EXPECT_EQ(entries[0].bytes, entry_bytes);
  fs::last_write_time(stray_temp, fs::file_time_type::clock::now() - std::chrono::hours(2));
  EXPECT_EQ(cache.prune().entries, 0u);
  CacheRemoval removed = cache.clear();
  EXPECT_EQ(removed.entries, 1u);
  EXPECT_EQ(removed.bytes, entry_bytes);
  EXPECT_TRUE(fs::is_directory(stray));
  EXPECT_TRUE(fs::is_directory(stray_temp));
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
}

// Only files named as kdsl names them are the cache's (`<2 hex>/<30 hex>.kdslbin`, lowercase,
// and that name's lock and temporary files; docs/cache.md): a user's `ab/my.kdslbin`, names of
// another length or case, and lock or temporary files of such names are neither counted, listed,
// evicted (on store or by prune) nor removed by clear. `kdsl cache clear` deleted ab/my.kdslbin.
TEST_F(CacheTest, FilesNotNamedLikeEntriesAreNotTheCaches) {
  CacheConfig cfg = config();
  cfg.max_bytes = 1;  // every eviction removes all it may
  DiskCache cache(cfg);
  FakeCompiler first{test_key("kdsl_first")};
  const fs::path entry =
      cache.entry_path(cache.get_or_compile(first.key, "{}", first.fn()).key_hex);
  const uint64_t entry_bytes = fs::file_size(entry);
  const std::string hex30 = "0123456789abcdef0123456789abcd";
  std::vector<fs::path> strays;
  for (const std::string& name : std::vector<std::string>{
           "ab/my.kdslbin", "ab/" + hex30.substr(1) + ".kdslbin", "ab/0" + hex30 + ".kdslbin",
           "ab/0123456789ABCDEF0123456789abcd.kdslbin", "AB/" + hex30 + ".kdslbin",
           "abc/" + hex30 + ".kdslbin", "ab/my.kdslbin.lock", "ab/my.kdslbin.tmp.1.0.abc",
           "ab/" + hex30 + ".kdslbin.tmp.x", "ab/" + hex30 + ".kdslbin.tmp.1.0.abc.bak",
           "ab/" + hex30 + ".kdslbin.lock.old"}) {
    strays.push_back(cfg.dir / name);
    fs::create_directories(strays.back().parent_path());
    write_file(strays.back(), "keep");
    // Older than any entry, and than an abandoned temporary file's hour.
    fs::last_write_time(strays.back(), fs::file_time_type::clock::now() - std::chrono::hours(2));
  }
  auto all_kept = [&] {
    for (const fs::path& p : strays) {
      if (read_file(p) != "keep") return ::testing::AssertionFailure() << p << " is gone";
    }
    return ::testing::AssertionSuccess();
  };
  CacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, entry_bytes);
  auto entries = cache.list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].path, entry);
  // A store evicts the older entry, and nothing else.
  FakeCompiler second{test_key("kdsl_second")};
  const fs::path entry2 =
      cache.entry_path(cache.get_or_compile(second.key, "{}", second.fn()).key_hex);
  const uint64_t entry2_bytes = fs::file_size(entry2);
  EXPECT_FALSE(fs::exists(entry));
  EXPECT_TRUE(all_kept());
  CacheRemoval pruned = cache.prune();
  EXPECT_EQ(pruned.entries, 1u);
  EXPECT_EQ(pruned.bytes, entry2_bytes);
  EXPECT_TRUE(all_kept());
  cache.get_or_compile(first.key, "{}", first.fn());
  CacheRemoval cleared = cache.clear();
  EXPECT_EQ(cleared.entries, 1u);
  EXPECT_EQ(cleared.bytes, entry_bytes);
  EXPECT_EQ(cleared.failed, 0u);
  EXPECT_TRUE(all_kept());
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_TRUE(cache.list().empty());
}

// clear() removes the empty shard folders it leaves, but not a file that has a shard's name.
TEST_F(CacheTest, ClearLeavesFilesNamedLikeShards) {
  CacheConfig cfg = config();
  DiskCache cache(cfg);
  FakeCompiler c{test_key()};
  fs::path entry = cache.entry_path(cache.get_or_compile(c.key, "{}", c.fn()).key_hex);
  const fs::path file = cfg.dir / (entry.parent_path().filename() == "cd" ? "ce" : "cd");
  write_file(file, "not the cache's");
  EXPECT_EQ(cache.clear().entries, 1u);
  EXPECT_FALSE(fs::exists(entry.parent_path()));
  EXPECT_TRUE(fs::is_regular_file(file));
}

// The path of test_key()'s entry, stored in `cache` by a fake compile.
fs::path stored_entry(DiskCache& cache) {
  FakeCompiler c{test_key()};
  return cache.entry_path(cache.get_or_compile(c.key, "{}", c.fn()).key_hex);
}

// `kdsl cache clear` while compiles run (found by a new-user test: it removed a writer's
// temporary file just before its rename, and a held lock, so a compile failed or another compiled
// the same kernel again): a young temporary file and a held lock stay; an hour-old temporary
// file and a free lock go.
TEST_F(CacheTest, ClearLeavesLiveWritersFiles) {
  DiskCache cache(config());
  const fs::path entry = stored_entry(cache);
  const fs::path young = fs::path(entry) += ".tmp.2.0.def";
  const fs::path old = fs::path(entry) += ".tmp.1.0.abc";
  write_file(young, "partial");
  write_file(old, "partial");
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(2));
  std::string error;
  std::optional<EntryLock> held =
      EntryLock::acquire(fs::path(entry) += ".lock", std::chrono::seconds(1), {}, &error);
  ASSERT_TRUE(held) << error;
  const fs::path free_lock = entry.parent_path() / (std::string(30, 'a') + ".kdslbin.lock");
  write_file(free_lock, "");
  EXPECT_EQ(cache.clear().entries, 1u);
  EXPECT_FALSE(fs::exists(entry));
  EXPECT_TRUE(fs::exists(young)) << "a running compile's temporary file";
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(fs::path(entry) += ".lock")) << "a held lock";
  EXPECT_FALSE(fs::exists(free_lock));
  held.reset();
  EXPECT_FALSE(fs::exists(fs::path(entry) += ".lock"));  // its holder removes it on release
}

// A writer whose shard folder a clear removed makes it again, for its lock and its entry.
TEST_F(CacheTest, CompileAfterItsShardWasClearedStoresTheEntry) {
  DiskCache cache(config());
  const fs::path entry = stored_entry(cache);
  ASSERT_EQ(cache.clear().entries, 1u);
  ASSERT_FALSE(fs::exists(entry.parent_path()));
  std::string error;
  EXPECT_TRUE(EntryLock::acquire(fs::path(entry) += ".lock", std::chrono::seconds(1), {}, &error))
      << error;
  fs::remove_all(entry.parent_path());
  EXPECT_EQ(write_file_atomic(entry, "bytes", {}), "");
  EXPECT_TRUE(fs::is_regular_file(entry));
}

// A symbolic link in a lock file's place is removed, not followed (found by a new-user test: the
// open with O_CREAT made the link's target); a lock held past the timeout says so.
TEST_F(CacheTest, LockFileLinkIsNotFollowedAndATimeoutIsReported) {
  DiskCache cache(config());
  const fs::path entry = stored_entry(cache);
  const fs::path lock = fs::path(entry) += ".lock";
  const fs::path victim = root_ / "victim";
  fs::create_symlink(victim, lock);
  std::string error;
  std::optional<EntryLock> first = EntryLock::acquire(lock, std::chrono::seconds(1), {}, &error);
  ASSERT_TRUE(first) << error;
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_FALSE(fs::is_symlink(lock));
  bool timed_out = false;
  EXPECT_FALSE(
      EntryLock::acquire(lock, std::chrono::milliseconds(50), {}, &error, &timed_out).has_value());
  EXPECT_TRUE(timed_out);
  EXPECT_NE(error.find("timed out after 50 ms"), std::string::npos) << error;
}

// Bytes this process has read through system calls (/proc/self/io's rchar), or nullopt.
std::optional<uint64_t> bytes_read_by_process() {
  std::ifstream io("/proc/self/io");
  for (std::string key; io >> key;) {
    uint64_t value = 0;
    if (!(io >> value)) break;
    if (key == "rchar:") return value;
  }
  return std::nullopt;
}

// A large file in an entry's place is rejected by its magic number without being read whole (found
// by a new-user test: a 3 GiB file took 30 s and 3 GB of memory): the bytes read are counted.
TEST_F(CacheTest, LargeForeignFileIsRejectedByItsMagicNumber) {
  DiskCache cache(config());
  const fs::path entry = stored_entry(cache);
  fs::resize_file(entry, 0);
  fs::resize_file(entry, uint64_t{64} << 20);  // sparse: zeros, no magic number
  const std::optional<uint64_t> before = bytes_read_by_process();
  ReadResult r = read_entry(entry, {});
  const std::optional<uint64_t> after = bytes_read_by_process();
  EXPECT_EQ(r.status, ReadResult::kDamaged);
  EXPECT_EQ(r.problem, "not a kdsl cache entry (bad magic number)");
  if (!before || !after) GTEST_SKIP() << "skipped the byte count: no /proc/self/io";
  EXPECT_LT(*after - *before, uint64_t{1} << 20) << "the 64 MiB file was read";
}

}  // namespace
}  // namespace kdsl
