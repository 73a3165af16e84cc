#include "inputs.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "dsl/numeric.h"
#include "src/log.h"
#include "src/npy.h"
#include "src/text_util.h"

namespace kdsl::cli {
namespace {

// The reference interpreter computes in float64 (dsl/SPEC.md section 14.1): i64 values beyond
// 2^53 in magnitude are rounded there, and so are --verify's comparisons of them.
void warn_beyond_float64(const std::string& name, const HostTensor& h) {
  if (h.dtype != DType::i64) return;
  constexpr int64_t kExact = int64_t{1} << 53;
  for (int64_t i = 0; i < h.numel(); ++i) {
    int64_t v;
    std::memcpy(&v, h.bytes.data() + i * sizeof v, sizeof v);
    if (v > kExact || v < -kExact) {
      log().warn(
          "input {}: element {} is {}, beyond 2^53: the CPU reference (float64) rounds it, and "
          "--verify compares it as float64 (dsl/SPEC.md section 14.1)",
          name, i, v);
      return;
    }
  }
}

std::pair<std::string, std::string> split_assign(const std::string& s, const char* option,
                                                 const char* form) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
    throw UsageError(fmt::format("bad {} '{}': expected {}", option, s, form));
  }
  return {s.substr(0, eq), s.substr(eq + 1)};
}

// A decimal number (or inf, -inf, nan) for --arg and --in NAME=const:; `what` starts the error
// (the option as given) and `examples` ends it. Hexadecimal is refused as --shape refuses it, and a
// value beyond f64 is called out of range rather than not a number.
double parse_number(const std::string& text, const std::string& what, const std::string& examples) {
  size_t used = 0;
  double v = 0;
  const bool hex = text.find_first_of("xX") != std::string::npos;
  try {
    if (!hex) v = std::stod(text, &used);
  } catch (const std::out_of_range&) {
    // stod throws for an underflow too (a subnormal such as 4e-320, or 1e-400, which rounds to
    // 0): values within f64's range, kept as strtod rounds them. Only an overflow is out of range
    // (found by a new-user test: 4e-320 was "out of the range of f64").
    char* end = nullptr;
    v = std::strtod(text.c_str(), &end);
    if (std::isinf(v)) {
      throw UsageError(fmt::format("{}: '{}' is out of the range of f64", what, text));
    }
    used = static_cast<size_t>(end - text.c_str());
  } catch (const std::exception&) {
    used = 0;
  }
  if (hex || text.empty() || used != text.size()) {
    throw UsageError(fmt::format("{}: '{}' is not a decimal number ({})", what, text, examples));
  }
  return v;
}

const SignatureParam* tensor_param(const KernelSignature& sig, const std::string& name) {
  for (const SignatureParam& p : sig.params) {
    if (p.is_tensor && p.name == name) return &p;
  }
  return nullptr;
}

std::string tensor_names(const KernelSignature& sig, bool inputs) {
  std::string s;
  for (const SignatureParam& p : sig.params) {
    if (!p.is_tensor || (inputs ? p.role == ir::Role::out : p.role == ir::Role::in)) continue;
    s += (s.empty() ? "" : ", ") + p.name;
  }
  return s.empty() ? "none" : s;
}

DType param_dtype(const SignatureParam& p, const std::vector<DType>& binding) {
  return p.generic >= 0 ? binding[p.generic] : p.dtype;
}

// One --in: where an input's values come from.
struct InputSource {
  std::string name;
  const SignatureParam* param = nullptr;
  std::string path;                // a .npy file
  std::optional<double> constant;  // const:VALUE
};

// Reads a .npy input, converting it when allowed, and takes unset symbols from its shape.
HostTensor read_input(const InputSource& src, DType want, bool convert, const KernelSignature& sig,
                      std::map<std::string, int64_t>& shape) {
  std::error_code ec;
  if (std::filesystem::is_directory(src.path, ec)) {
    throw Error(fmt::format("{}: is a directory, not a .npy file", src.path));
  }
  HostTensor h = read_npy(src.path, want);
  if (h.dtype != want) {
    bool convertible = is_complex(h.dtype) == is_complex(want);
    if (!convert || !convertible) {
      throw ArgumentError(fmt::format(
          "{}: holds {} values but '{}' is {}{}", src.path, dtype_name(h.dtype), src.name,
          dtype_name(want),
          convertible ? fmt::format(" (add --convert to round them to {})", dtype_name(want))
                      : ""));
    }
    HostTensor c(want, h.shape);
    // Finite values that became inf. Only real data converts (c64 is the one complex dtype).
    int64_t overflowed = 0, first = -1;
    for (int64_t i = 0; i < h.numel(); ++i) {
      c.set(i, h.get(i), h.get_imag(i));
      if (std::isfinite(h.get(i)) && std::isinf(c.get(i)) && overflowed++ == 0) first = i;
    }
    if (overflowed > 0) {
      log().warn(
          "{}: {} beyond {}'s largest became infinite under --convert (the first at element "
          "{}: {})",
          src.path, counted(overflowed, "finite value", "finite values"), dtype_name(want), first,
          h.get(first));
    }
    log().info("{}: converted {} values to {}", src.path, dtype_name(h.dtype), dtype_name(want));
    h = std::move(c);
  }
  const SignatureParam& p = *src.param;
  std::string expected;
  for (size_t ax = 0; ax < p.shape.size(); ++ax) {
    const ir::Extent& e = p.shape[ax];
    expected += (ax ? ", " : "") +
                (e.symbol >= 0 ? sig.symbols[e.symbol].name : std::to_string(e.constant));
  }
  expected = "(" + expected + (p.shape.size() == 1 ? ",)" : ")");
  if (h.shape.size() != p.shape.size()) {
    throw ArgumentError(fmt::format("{}: has shape {} but '{}' has shape {}", src.path,
                                    shape_text(h.shape), src.name, expected));
  }
  for (size_t ax = 0; ax < p.shape.size(); ++ax) {
    const ir::Extent& e = p.shape[ax];
    if (e.symbol < 0) {
      if (h.shape[ax] != e.constant) {
        throw ArgumentError(fmt::format("{}: has shape {} but '{}' has shape {}", src.path,
                                        shape_text(h.shape), src.name, expected));
      }
      continue;
    }
    const std::string& sym = sig.symbols[e.symbol].name;
    auto it = shape.find(sym);
    if (it == shape.end()) {
      shape[sym] = h.shape[ax];
    } else if (it->second != h.shape[ax]) {
      throw ArgumentError(fmt::format("{}: has shape {} but '{}' has shape {} with {} = {}",
                                      src.path, shape_text(h.shape), src.name, expected, sym,
                                      it->second));
    }
  }
  return h;
}

std::vector<int64_t> param_shape(const SignatureParam& p, const KernelSignature& sig,
                                 const std::map<std::string, int64_t>& shape) {
  std::vector<int64_t> out;
  for (const ir::Extent& e : p.shape) {
    out.push_back(e.symbol >= 0 ? shape.at(sig.symbols[e.symbol].name) : e.constant);
  }
  return out;
}

// A value given on the command line (--in NAME=const:V, --arg NAME=V) for `name`, of dtype `t`
// (value_fit_problem). Throws ArgumentError: the value would otherwise be truncated or saturated
// without a word.
void check_value_fits(double v, DType t, const std::string& what, const std::string& name) {
  if (const std::string why = value_fit_problem(v, t); !why.empty()) {
    throw ArgumentError(fmt::format("{}: '{}' is {}, {}", what, name, dtype_name(t), why));
  }
}

HostTensor constant_tensor(const InputSource& src, DType t, std::vector<int64_t> shape) {
  double v = *src.constant;
  check_value_fits(v, t, fmt::format("--in {}=const:{}", src.name, v), src.name);
  HostTensor h(t, std::move(shape));
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, v);
  return h;
}

}  // namespace

void check_sizes(const KernelSignature& sig, const std::vector<DType>& binding,
                 const std::map<std::string, int64_t>& shape) {
  unsigned __int128 total = 0;
  for (const SignatureParam& p : sig.params) {
    if (!p.is_tensor) continue;
    unsigned __int128 n = dtype_size(param_dtype(p, binding));
    for (int64_t d : param_shape(p, sig, shape)) {
      n *= static_cast<uint64_t>(d);
      if (n > (static_cast<unsigned __int128>(1) << 80)) break;
    }
    total += n;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  unsigned __int128 memory = pages > 0 && page > 0 ? static_cast<unsigned __int128>(pages) * page
                                                   : static_cast<unsigned __int128>(1) << 40;
  if (total > memory / 2) {
    double gib = static_cast<double>(total) / (1024.0 * 1024 * 1024);
    throw ArgumentError(
        fmt::format("the tensors of '{}' with {} would need {:.3g} GiB of host "
                    "memory; kdsl run uses at most half of this machine's {:.3g} GiB",
                    sig.name, shape_values_text(shape), gib,
                    static_cast<double>(memory) / (1024.0 * 1024 * 1024)));
  }
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

Problem build_problem(const KernelOptions& k, const DataOptions& d, nlohmann::json& report) {
  Selected sel = select_kernel(k.file, k.kernel);
  const KernelSignature& sig = *sel.sig;
  ProblemSpec ps;
  ps.kernel = sig.name;
  ps.seed = d.seed;
  ps.binding = single_binding(sig, k);
  ps.schedule = parse_schedule(k.schedule);
  ps.shapes = single_shape(sig, k);

  std::vector<InputSource> sources;
  for (const std::string& item : d.in) {
    auto [name, value] = split_assign(item, "--in", "NAME=FILE.npy or NAME=const:VALUE");
    InputSource src;
    src.name = name;
    src.param = tensor_param(sig, name);
    if (!src.param || src.param->role == ir::Role::out) {
      throw ArgumentError(fmt::format("--in {}: kernel '{}' has no input tensor '{}' (inputs: {})",
                                      item, sig.name, name, tensor_names(sig, true)));
    }
    for (const InputSource& s : sources) {
      if (s.name == name) throw UsageError(fmt::format("--in sets '{}' twice", name));
    }
    if (value.starts_with("const:")) {
      src.constant = parse_number(value.substr(6), "--in " + item,
                                  "e.g. const:1.5, const:-2e-3, const:-inf, const:nan");
    } else {
      src.path = value;
    }
    sources.push_back(std::move(src));
  }
  for (const InputSource& src : sources) {
    if (src.constant) continue;
    HostTensor h = read_input(src, param_dtype(*src.param, ps.binding), d.convert, sig, ps.shapes);
    warn_beyond_float64(src.name, h);
    report[src.name] = {{"source", "npy"}, {"path", src.path}};
    log().info("input {}: {} {} from {}", src.name, dtype_name(h.dtype), shape_text(h.shape),
               src.path);
    ps.inputs[src.name] = std::move(h);
  }
  require_shapes(sig, ps.shapes, /*from_inputs=*/true);
  check_sizes(sig, ps.binding, ps.shapes);
  for (const InputSource& src : sources) {
    if (!src.constant) continue;
    DType t = param_dtype(*src.param, ps.binding);
    ps.inputs[src.name] = constant_tensor(src, t, param_shape(*src.param, sig, ps.shapes));
    if (t == DType::i64 && std::fabs(*src.constant) >= 9007199254740992.0) {
      log().warn(
          "input {}: the constant {:.17g} is at or beyond 2^53: it was read as a float64, "
          "exact only up to 2^53 in magnitude (dsl/SPEC.md section 14.1)",
          src.name, *src.constant);
    }
    report[src.name] = {{"source", "const"}, {"value", *src.constant}};
    log().info("input {}: every element {}", src.name, *src.constant);
  }
  for (const SignatureParam& p : sig.params) {
    if (p.is_tensor && p.role != ir::Role::out && !report.contains(p.name)) {
      report[p.name] = {{"source", "random"}, {"seed", d.seed}};
      log().info("input {}: random (seed {}; docs/cli.md has the distributions)", p.name, d.seed);
    }
  }
  for (const std::string& a : d.args) {
    auto [name, value] = split_assign(a, "--arg", "NAME=NUMBER");
    // A bool parameter also takes the language's spellings, True and False (any case).
    const SignatureParam* param = nullptr;
    for (const SignatureParam& p : sig.params) {
      if (!p.is_tensor && p.name == name) param = &p;
    }
    const bool is_bool = param && param_dtype(*param, ps.binding) == DType::b8;
    const std::string word = env_word(value);
    const double v =
        is_bool && (word == "true" || word == "false")
            ? (word == "true" ? 1.0 : 0.0)
            : parse_number(
                  value, "--arg " + a,
                  is_bool ? fmt::format("a bool: True, False, 1 or 0; e.g. --arg {}=True", name)
                          : std::string("e.g. --arg eps=1e-5"));
    for (const SignatureParam& p : sig.params) {
      if (!p.is_tensor && p.name == name) {
        check_value_fits(v, param_dtype(p, ps.binding), "--arg " + a, name);
        // As for --in NAME=const: (a launch passes scalars as float64 too): 9007199254740993 was
        // read as 9007199254740992 without a word (found by a new-user test).
        if (param_dtype(p, ps.binding) == DType::i64 && std::fabs(v) >= 9007199254740992.0) {
          log().warn(
              "--arg {}: the value {:.17g} is at or beyond 2^53: it was read as a float64, exact "
              "only up to 2^53 in magnitude (dsl/SPEC.md section 14.1)",
              a, v);
        }
      }
    }
    if (ps.scalars.count(name)) throw UsageError(fmt::format("--arg sets '{}' twice", name));
    ps.scalars[name] = v;
  }
  // A scalar without a default is a value the command line leaves out: a usage error (exit code
  // 2, as for a shape symbol), naming the option that gives it.
  for (const SignatureParam& p : sig.params) {
    if (!p.is_tensor && !p.default_value && !ps.scalars.count(p.name)) {
      throw UsageError(
          fmt::format("scalar parameter '{}' has no default: give its value with --arg {}=VALUE",
                      p.name, p.name));
    }
  }
  return make_problem(sel.fe, ps);
}

namespace {

// The file that writing `path` writes: absolute, normalized, with symbolic links followed (at
// most 40, as Linux follows; more sets *loop). Absolute first: weakly_canonical leaves a relative
// path to a file not yet made as it is, so a.npy and ./a.npy were two files until one existed;
// and it does not follow a link to a file not yet made, so a link and its target were two.
std::filesystem::path written_file(const std::string& path, bool* loop) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return fs::path(path).lexically_normal();
  for (int hop = 0; hop <= 40; ++hop) {
    if (!fs::is_symlink(fs::symlink_status(p, ec))) {
      const fs::path c = fs::weakly_canonical(p, ec);
      return ec ? p.lexically_normal() : c.lexically_normal();
    }
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return p.lexically_normal();
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  *loop = true;
  return p.lexically_normal();
}

}  // namespace

std::vector<std::pair<int, std::string>> resolve_outputs(const Problem& p,
                                                         const std::vector<std::string>& out,
                                                         const std::vector<std::string>& in) {
  std::vector<std::pair<int, std::string>> files;
  std::map<std::string, std::string> given;              // output name -> its --out
  std::map<std::filesystem::path, std::string> targets;  // file (absolute, normal) -> its --out
  // The input files (--in NAME=FILE.npy), by the file they read: an output written over one
  // would lose it (found by a new-user test), unless it is an InOut tensor's own file.
  std::map<std::filesystem::path, std::pair<std::string, std::string>> sources;  // (name, item)
  for (const std::string& item : in) {
    auto [name, path] = split_assign(item, "--in", "NAME=FILE.npy or NAME=const:VALUE");
    if (path.starts_with("const:")) continue;
    bool loop = false;
    sources.emplace(written_file(path, &loop), std::make_pair(name, item));
  }
  for (const std::string& item : out) {
    auto [name, path] = split_assign(item, "--out", "NAME=FILE.npy");
    if (auto [first, fresh] = given.emplace(name, item); !fresh) {
      throw UsageError(fmt::format("--out sets '{}' twice: {} and {}", name, first->second, item));
    }
    // The file written: symbolic links followed (a link is written through), so two names of
    // one file are caught, and the checks below look at the directory really written into.
    bool loop = false;
    const std::filesystem::path target = written_file(path, &loop);
    if (loop) {
      throw Error(fmt::format("--out {}: {}: too many levels of symbolic links", item, path));
    }
    if (auto [first, fresh] = targets.emplace(target, item); !fresh) {
      throw UsageError(
          fmt::format("--out {} and {} name the same file; one would overwrite the other",
                      first->second, item));
    }
    if (auto src = sources.find(target); src != sources.end() && src->second.first != name) {
      throw UsageError(fmt::format(
          "--out {} would overwrite the input file of --in {}; write the output elsewhere", item,
          src->second.second));
    }
    int index = -1;
    for (size_t t = 0; t < p.ir.tensors.size(); ++t) {
      if (p.ir.tensors[t].name == name && p.ir.tensors[t].role != ir::Role::in) {
        index = static_cast<int>(t);
      }
    }
    if (index < 0) {
      throw ArgumentError(fmt::format("--out {}: kernel '{}' has no output '{}' (outputs: {})",
                                      item, p.ir.name, name, tensor_names(*p.sig, false)));
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      std::string dir = path;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      throw Error(fmt::format("--out {}: {} is a directory; give a file name, e.g. {}/{}.npy", item,
                              path, dir, name));
    }
    const bool link = std::filesystem::is_symlink(path, ec);
    std::filesystem::path dir =
        link ? target.parent_path() : std::filesystem::path(path).parent_path();
    if (dir.empty()) dir = ".";
    // In messages: "." alone reads as a stray full stop.
    const std::string where = link ? fmt::format("{} (where {} links to)", dir.string(), path)
                              : dir == "." ? "the current directory"
                                           : dir.string();
    if (!std::filesystem::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0) {
      const char* why = !std::filesystem::exists(dir, ec)         ? "no such directory"
                        : !std::filesystem::is_directory(dir, ec) ? "not a directory"
                                                                  : "permission denied";
      throw Error(fmt::format("--out {}: cannot write into {}: {}", item, where, why));
    }
    // A name the file system refuses is found now, not after the run.
    const std::string base = std::filesystem::path(path).filename().string();
    const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
    if (name_max > 0 && base.size() > static_cast<size_t>(name_max)) {
      throw Error(fmt::format(
          "--out {}: the file name is {} bytes long; the file system of {} allows at most {}", item,
          base.size(), where, name_max));
    }
    // So is a file that cannot be created there (a directory that takes no new files, such as
    // /proc, even for root, whom access() lets through).
    if (const std::string why = npy_write_problem(path); !why.empty()) {
      throw Error(fmt::format("--out {}: {}", item, why));
    }
    files.emplace_back(index, path);
  }
  return files;
}

nlohmann::json summarize(const HostTensor& t) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t finite = 0, nans = 0, infs = 0;
  // A c64 output is summarized by its elements' moduli |z| (the real parts alone, as before,
  // said nothing of the imaginary ones; found by a new-user test).
  const bool complex = t.dtype == DType::c64;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double re = t.get(i), im = complex ? t.get_imag(i) : 0;
    // (hypot(inf, NaN) is inf: an element with a NaN part counts as NaN.)
    const double v = std::isnan(im) ? im : complex && !std::isnan(re) ? std::hypot(re, im) : re;
    if (std::isnan(v)) {
      ++nans;
    } else if (std::isinf(v)) {
      ++infs;
    } else {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      ++finite;
    }
  }
  nlohmann::json j = {
      {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"nan", nans}, {"inf", infs}};
  if (complex) j["of"] = "modulus";
  if (finite) {
    j["min"] = lo;
    j["max"] = hi;
    j["mean"] = sum / static_cast<double>(finite);
  }
  return j;
}

std::string summary_line(const std::string& name, const nlohmann::json& s) {
  std::string line = fmt::format("{}: {} {}", name, s["dtype"].get<std::string>(),
                                 shape_text(s["shape"].get<std::vector<int64_t>>()));
  if (s.contains("min")) {
    // Integers and bools in full (an i32's -2147483648 read -2.14748e+09).
    const std::string dtype = s["dtype"].get<std::string>();
    const bool whole = dtype == "i32" || dtype == "i64" || dtype == "bool";
    auto value = [&](const char* key) {
      const double v = s[key].get<double>();
      return whole ? fmt::format("{:.0f}", v) : fmt::format("{:.6g}", v);
    };
    line += fmt::format(": {}min {}, max {}, mean {:.6g}", s.contains("of") ? "|z| " : "",
                        value("min"), value("max"), s["mean"].get<double>());
  }
  if (s["nan"].get<int64_t>()) line += fmt::format(", {} NaN", s["nan"].get<int64_t>());
  if (s["inf"].get<int64_t>()) line += fmt::format(", {} infinite", s["inf"].get<int64_t>());
  return line;
}

}  // namespace kdsl::cli
