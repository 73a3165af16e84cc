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
#include <map>
#include <optional>
#include <vector>

#include "dsl/diagnostics.h"
#include "kdsl/error.h"

namespace kdsl {
namespace {

const char kMagic[] = "\x93NUMPY";

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(fmt::format("{}: {}", path, what));
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// One value of the header's dict: a quoted string's contents, a bracketed value's text with its
// brackets ("(2, 3)", "[('a', '<f4')]"), or a bare word ("True", "False", "12").
struct HeaderValue {
  enum Kind { kString, kTuple, kBracketed, kWord } kind = kWord;
  std::string text;
};

// Reads the header's Python dict literal as far as .npy headers go (NumPy reads it with
// ast.literal_eval): quoted keys, and values that are quoted strings, bracketed values (tuples,
// lists, nested, strings inside) or bare words. A plain scan (no std::regex, whose recursion a
// long header can overflow). Throws for a header that is not such a dict, and for a key given
// twice (literal_eval would keep the last; it is refused, as it says two things).
class HeaderReader {
 public:
  HeaderReader(const std::string& path, const std::string& header) : path_(path), h_(header) {}

  std::map<std::string, HeaderValue> dict() {
    std::map<std::string, HeaderValue> out;
    skip_blanks();
    if (!at('{')) malformed("it does not start with '{'");
    ++p_;
    for (skip_blanks(); !at('}'); skip_blanks()) {
      if (!at('\'') && !at('"')) malformed("a key is not a quoted string");
      std::string key = quoted();
      skip_blanks();
      if (!at(':')) malformed(fmt::format("no ':' after the key '{}'", key));
      ++p_;
      skip_blanks();
      HeaderValue v = value();
      if (!out.emplace(key, std::move(v)).second) {
        bad(path_, fmt::format("malformed header: it gives '{}' twice", key));
      }
      skip_blanks();
      if (at(',')) {
        ++p_;
      } else if (!at('}')) {
        malformed(fmt::format("no ',' or '}}' after the value of '{}'", key));
      }
    }
    ++p_;
    skip_blanks();  // the padding NumPy writes: spaces, then '\n'
    if (p_ != h_.size()) malformed("text follows the dict's '}'");
    return out;
  }

 private:
  [[noreturn]] void malformed(const std::string& why) const {
    bad(path_, fmt::format("malformed header: {} (byte {} of the header; expected a Python dict "
                           "such as {{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }})",
                           why, p_));
  }
  bool at(char c) const { return p_ < h_.size() && h_[p_] == c; }
  void skip_blanks() {
    while (p_ < h_.size() && is_blank(h_[p_])) ++p_;
  }
  // A string in quotes, at its opening quote; its contents.
  std::string quoted() {
    const size_t close = h_.find(h_[p_], p_ + 1);
    if (close == std::string::npos) malformed("a string is not closed");
    std::string text = h_.substr(p_ + 1, close - p_ - 1);
    p_ = close + 1;
    return text;
  }
  HeaderValue value() {
    if (p_ >= h_.size()) malformed("a value is missing");
    const char c = h_[p_];
    if (c == '\'' || c == '"') return {HeaderValue::kString, quoted()};
    if (c == '(' || c == '[' || c == '{') {
      return {c == '(' ? HeaderValue::kTuple : HeaderValue::kBracketed, bracketed()};
    }
    const size_t start = p_;
    while (p_ < h_.size() && (std::isalnum(static_cast<unsigned char>(h_[p_])) != 0 ||
                              h_[p_] == '_' || h_[p_] == '.' || h_[p_] == '-' || h_[p_] == '+')) {
      ++p_;
    }
    if (p_ == start) malformed("a value is missing");
    return {HeaderValue::kWord, h_.substr(start, p_ - start)};
  }
  // From an opening bracket to the one that closes it; the text with both.
  std::string bracketed() {
    const size_t start = p_;
    std::string closers;
    do {
      const char c = h_[p_];
      if (c == '\'' || c == '"') {
        quoted();
        continue;
      }
      if (c == '(' || c == '[' || c == '{') {
        closers.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (c == ')' || c == ']' || c == '}') {
        if (c != closers.back()) {
          malformed(fmt::format("'{}' where '{}' was expected", c, closers.back()));
        }
        closers.pop_back();
      }
      ++p_;
    } while (!closers.empty() && p_ < h_.size());
    if (!closers.empty()) malformed("a bracket is not closed");
    return h_.substr(start, p_ - start);
  }

  const std::string& path_;
  const std::string& h_;
  size_t p_ = 0;
};

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

// `s` without the blanks (spaces, tabs, line breaks) around it.
std::string strip_blanks(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_blank(s[b])) ++b;
  while (e > b && is_blank(s[e - 1])) --e;
  return s.substr(b, e - b);
}

}  // namespace

// The header's shape, the inside of a tuple of non-negative integers: "" for (), "4," for (4,),
// "2, 4" or "2, 4, " for (2, 4) (a trailing comma allowed, as in Python). A sign, a decimal point
// or an empty item is an error: (2,-4) used to read as (2, 4).
std::vector<int64_t> parse_shape(const std::string& path, const std::string& dims) {
  auto malformed = [&] {
    bad(path, fmt::format("shape ({}) is not a tuple of non-negative integers", dims));
  };
  const std::string inner = strip_blanks(dims);
  std::vector<std::string> items;
  for (size_t from = 0;;) {
    const size_t comma = std::min(inner.find(',', from), inner.size());
    items.push_back(strip_blanks(inner.substr(from, comma - from)));
    if (comma == inner.size()) break;
    from = comma + 1;
  }
  // "()" is one empty item; "(4,)" and "(4, 8, )" end with one.
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

namespace {

// What a .npy header says: the dtype (a descr `want` accepts), the shape tuple's text without
// its parentheses, and the shape. NumPy's header has exactly these three keys.
struct HeaderFields {
  DType dtype;
  std::string dims;
  std::vector<int64_t> shape;
};

HeaderFields header_fields(const std::string& path, const std::string& header, DType want) {
  std::map<std::string, HeaderValue> fields = HeaderReader(path, header).dict();
  for (const auto& [key, value] : fields) {
    if (key != "descr" && key != "fortran_order" && key != "shape") {
      bad(path, fmt::format("malformed header: unexpected key '{}' (a .npy header holds descr, "
                            "fortran_order and shape)",
                            terminal_safe(key)));
    }
  }
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (!fields.contains(key)) bad(path, fmt::format("malformed header: no '{}'", key));
  }
  const HeaderValue& descr = fields["descr"];
  auto t = descr.kind == HeaderValue::kString ? descr_dtype(descr.text, want) : std::nullopt;
  if (!t) {
    bad(path, fmt::format("unsupported dtype '{}' (expected {}; bf16 is stored as <u2, <i2 or <V2)",
                          terminal_safe(descr.text), dtype_name(want)));
  }
  const HeaderValue& order = fields["fortran_order"];
  if (order.kind != HeaderValue::kWord || (order.text != "True" && order.text != "False")) {
    bad(path, fmt::format("malformed header: fortran_order is {}, not True or False",
                          terminal_safe(order.text)));
  }
  if (order.text == "True") bad(path, "Fortran-order arrays are not supported");
  const HeaderValue& tuple = fields["shape"];
  if (tuple.kind != HeaderValue::kTuple) {
    bad(path, fmt::format("shape {} is not a tuple of non-negative integers", tuple.text));
  }
  const std::string dims = tuple.text.substr(1, tuple.text.size() - 2);  // without ( and )
  return {*t, dims, parse_shape(path, dims)};
}

}  // namespace

HostTensor read_npy(const std::string& path, DType want) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot open: ") + std::strerror(errno));
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, kMagic, 6) != 0) bad(path, "not a .npy file (bad magic)");
  uint32_t header_len = 0;
  // NumPy writes versions 1.0, 2.0 and 3.0 and reads no other (numpy/lib/format.py).
  if (magic[7] != 0) {
    bad(path, fmt::format("unsupported .npy format version {}.{}", static_cast<int>(magic[6]),
                          static_cast<int>(static_cast<unsigned char>(magic[7]))));
  }
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
  const auto [t, dims, shape] = header_fields(path, header, want);
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
  const bool overflow = __builtin_mul_overflow(elems, dtype_size(t), &need);
  if (overflow || (seekable && need > static_cast<uint64_t>(end_pos - data_start))) {
    bad(path, fmt::format("truncated data: shape ({}) needs {} bytes, the file has {}", dims,
                          overflow ? std::string("more than 2^64") : std::to_string(need),
                          static_cast<uint64_t>(end_pos - data_start)));
  }
  // Bytes after the data mean the header does not describe the file (a mislabelled dtype, as
  // f4 over float64 data): reading its first bytes would give wrong values, silently.
  // (clang 14 does not let a lambda capture the structured bindings: the text is made here.)
  const std::string described = fmt::format("shape ({}) {}", dims, dtype_name(t));
  auto extra = [&](uint64_t have) {
    bad(path, fmt::format("{} bytes after the data of {} ({} bytes): the header's dtype or "
                          "shape does not describe the file",
                          have - need, described, need));
  };
  if (seekable && need < static_cast<uint64_t>(end_pos - data_start)) {
    extra(static_cast<uint64_t>(end_pos - data_start));
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
    if (data.size() > need) extra(data.size());
    HostTensor out(t, shape);
    std::copy_n(data.begin(), out.bytes.size(), reinterpret_cast<char*>(out.bytes.data()));
    return out;
  }
  HostTensor out(t, shape);
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
