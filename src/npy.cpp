#include "npy.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kdsl/error.h"

namespace kdsl {
namespace {

const char kMagic[] = "\x93NUMPY";

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(fmt::format("{}: {}", path, what));
}

// The value of `key` in the header's Python dict literal: a quoted string's contents, a tuple's
// contents without the parentheses, or True/False; "" when absent. A plain scan (no std::regex,
// whose recursion a long header can overflow).
std::string field(const std::string& header, const std::string& key) {
  const std::string quoted = "'" + key + "'";
  size_t p = header.find(quoted);
  if (p == std::string::npos) return "";
  p += quoted.size();
  auto skip_blanks = [&] {
    while (p < header.size() && (header[p] == ' ' || header[p] == '\t')) ++p;
  };
  skip_blanks();
  if (p >= header.size() || header[p] != ':') return "";
  ++p;
  skip_blanks();
  if (p >= header.size()) return "";
  const char open = header[p];
  if (open == '\'' || open == '(') {
    size_t close = header.find(open == '(' ? ')' : '\'', p + 1);
    if (close == std::string::npos) return "";
    return header.substr(p + 1, close - p - 1);
  }
  for (const char* word : {"True", "False"}) {
    if (header.compare(p, std::strlen(word), word) == 0) return word;
  }
  return "";
}

std::optional<DType> descr_dtype(const std::string& d, DType want) {
  if (d == "<f2") return DType::f16;
  if (d == "<f4") return DType::f32;
  if (d == "<f8") return DType::f64;
  if (d == "<i4") return DType::i32;
  if (d == "<i8") return DType::i64;
  if (d == "|b1") return DType::b8;
  if (d == "<c8") return DType::c64;
  if ((d == "<u2" || d == "<i2" || d == "<V2" || d == "|V2") && want == DType::bf16)
    return DType::bf16;
  return std::nullopt;
}

const char* dtype_descr(DType t) {
  switch (t) {
    case DType::f16:
      return "<f2";
    case DType::bf16:
      return "<u2";
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::i32:
      return "<i4";
    case DType::i64:
      return "<i8";
    case DType::b8:
      return "|b1";
    case DType::c64:
      return "<c8";
  }
  return "<f4";
}

}  // namespace

// The header's shape, a tuple of non-negative integers: "()", "(4,)", "(2, 4)" (a trailing comma
// allowed). A sign, a decimal point or an empty item is an error: (2,-4) used to read as (2, 4).
std::vector<int64_t> parse_shape(const std::string& path, const std::string& dims) {
  auto malformed = [&] {
    bad(path, fmt::format("shape ({}) is not a tuple of non-negative integers", dims));
  };
  // (field() gives the tuple without its parentheses.)
  std::string inner = dims;
  if (inner.size() >= 2 && inner.front() == '(' && inner.back() == ')') {
    inner = inner.substr(1, inner.size() - 2);
  }
  std::vector<std::string> items;
  for (size_t from = 0;;) {
    const size_t comma = std::min(inner.find(',', from), inner.size());
    std::string item = inner.substr(from, comma - from);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    items.push_back(item);
    if (comma == inner.size()) break;
    from = comma + 1;
  }
  // "()" is one empty item; "(4,)" ends with one.
  if (items.back().empty() && (items.size() == 1 || inner.back() == ',')) items.pop_back();
  std::vector<int64_t> shape;
  for (const std::string& item : items) {
    uint64_t d = 0;  // unsigned: a sign is not a digit
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    if (ec == std::errc::result_out_of_range || d > static_cast<uint64_t>(INT64_MAX)) {
      bad(path, fmt::format("shape ({}) has a size beyond 2^63", dims));
    }
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) malformed();
    shape.push_back(static_cast<int64_t>(d));
  }
  return shape;
}

HostTensor read_npy(const std::string& path, DType want) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot open: ") + std::strerror(errno));
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, kMagic, 6) != 0) bad(path, "not a .npy file (bad magic)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    bad(path, fmt::format("unsupported .npy format version {}", static_cast<int>(magic[6])));
  }
  if (header_len > (1u << 20)) bad(path, "header too large");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) bad(path, "truncated header");
  std::string descr = field(header, "descr");
  auto t = descr_dtype(descr, want);
  if (!t) {
    bad(path, fmt::format("unsupported dtype '{}' (expected {}; bf16 is stored as <u2, <i2 or <V2)",
                          descr, dtype_name(want)));
  }
  if (field(header, "fortran_order") == "True") bad(path, "Fortran-order arrays are not supported");
  const std::string dims = field(header, "shape");
  const std::vector<int64_t> shape = parse_shape(path, dims);
  if (shape.size() > 8) bad(path, fmt::format("shape ({}) has more than 8 axes", dims));
  // The data must be in the file before anything is allocated for it.
  uint64_t elems = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(elems, static_cast<uint64_t>(d), &elems)) elems = UINT64_MAX;
  }
  // A pipe (--in x=/dev/stdin) cannot seek: its size is not known before reading, so the read
  // below checks that the data was all there.
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streampos end_pos = in.tellg();
  const bool seekable = data_start != std::streampos(-1) && end_pos != std::streampos(-1);
  in.clear();
  if (seekable) in.seekg(data_start);
  uint64_t need = 0;
  const bool overflow = __builtin_mul_overflow(elems, dtype_size(*t), &need);
  if (overflow || (seekable && need > static_cast<uint64_t>(end_pos - data_start))) {
    bad(path, fmt::format("truncated data: shape ({}) needs {} bytes, the file has {}", dims,
                          overflow ? std::string("more than 2^64") : std::to_string(need),
                          static_cast<uint64_t>(end_pos - data_start)));
  }
  if (!seekable) {
    // Read what the pipe holds (in pieces, so a header that claims more than it sends allocates
    // no more than was sent), then check it is the whole tensor.
    std::vector<char> data;
    char piece[1 << 16];
    while (data.size() <= need && in.read(piece, sizeof piece).gcount() > 0) {
      data.insert(data.end(), piece, piece + in.gcount());
    }
    if (data.size() < need) {
      bad(path, fmt::format("truncated data: shape ({}) needs {} bytes, the stream had {}", dims,
                            need, data.size()));
    }
    HostTensor out(*t, shape);
    std::copy_n(data.begin(), out.bytes.size(), reinterpret_cast<char*>(out.bytes.data()));
    return out;
  }
  HostTensor out(*t, shape);
  in.read(reinterpret_cast<char*>(out.bytes.data()),
          static_cast<std::streamsize>(out.bytes.size()));
  if (static_cast<size_t>(in.gcount()) != out.bytes.size()) {
    bad(path, fmt::format("truncated data: expected {} bytes", out.bytes.size()));
  }
  return out;
}

namespace {

// Where write_npy writes `path`. A regular file is written to a temporary file beside it, then
// renamed over it: a failed write (a full disk) leaves neither a truncated file nor a damaged old
// one. Anything else that exists (a device, a pipe) is written in place, and so is a symbolic
// link: a rename would replace the link itself (--out y=/dev/stdout replaced /dev/stdout).
struct OutputFile {
  bool in_place = false;
  std::string target;      // the file opened: `path`, or the temporary file
  bool replacing = false;  // an existing regular file is replaced; it had `mode`
  mode_t mode = 0;
  std::string problem;  // why it must not be written, or ""
};

OutputFile output_file(const std::string& path) {
  OutputFile f;
  std::error_code ec;
  f.in_place = std::filesystem::is_symlink(path, ec) ||
               (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec));
  // The temporary name is short (the file's own name may already be as long as the file system
  // allows) and hidden; the counter keeps a process's temporary files apart.
  static std::atomic<unsigned> serial{0};
  const std::filesystem::path beside = std::filesystem::path(path).parent_path();
  f.target = f.in_place
                 ? path
                 : (beside / fmt::format(".kdsl-npy.{}.{}.tmp", ::getpid(), serial++)).string();
  // Replacing an existing file keeps what its permissions say: one we may not write is refused
  // (the rename would have replaced it anyway), and the new file gets the old one's mode.
  struct stat old_st {};
  f.replacing = !f.in_place && ::stat(path.c_str(), &old_st) == 0;
  f.mode = old_st.st_mode & 07777;
  if (f.replacing && ::access(path.c_str(), W_OK) != 0) {
    f.problem = "cannot write: Permission denied";
  }
  return f;
}

// The start of the message for a temporary file that cannot be created.
std::string create_temp_text(const OutputFile& f) {
  return fmt::format(
      "cannot create the temporary file {} (the output is written there, then renamed into "
      "place)",
      f.target);
}

}  // namespace

void write_npy(const std::string& path, const HostTensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += fmt::format("{}, ", t.shape[i]);
  if (t.shape.size() > 1) shape.resize(shape.size() - 2);
  if (t.shape.size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   dtype_descr(t.dtype), shape);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const OutputFile file = output_file(path);
  auto fail = [&](const std::string& what, int err) {
    std::error_code rm;
    if (!file.in_place) std::filesystem::remove(file.target, rm);
    bad(path, fmt::format("{}: {}", what, err ? std::strerror(err) : "I/O error"));
  };
  if (!file.problem.empty()) bad(path, file.problem);
  std::ofstream out(file.target, std::ios::binary | std::ios::trunc);
  if (!out) fail(file.in_place ? "cannot write" : create_temp_text(file), errno);
  if (file.replacing) ::chmod(file.target.c_str(), file.mode);
  errno = 0;
  out.write(kMagic, 6);
  char version[2] = {1, 0};
  out.write(version, 2);
  unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                          static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(t.bytes.data()),
            static_cast<std::streamsize>(t.bytes.size()));
  out.flush();
  out.close();
  if (out.fail()) fail("write failed", errno);
  if (!file.in_place) {
    std::error_code ec;
    std::filesystem::rename(file.target, path, ec);
    if (ec) fail(fmt::format("cannot rename the temporary file {} to it", file.target), ec.value());
  }
}

std::string npy_write_problem(const std::string& path) {
  const OutputFile file = output_file(path);
  if (!file.problem.empty() || file.in_place) return file.problem;
  const int fd = ::open(file.target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return fmt::format("{}: {}", create_temp_text(file), std::strerror(errno));
  ::close(fd);
  ::unlink(file.target.c_str());
  return "";
}

}  // namespace kdsl
