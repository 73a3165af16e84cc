// Options and values shared by the subcommands: kernels, dtypes, shapes, targets.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli.h"
#include "dsl/diagnostics.h"
#include "src/driver.h"
#include "src/gpu_bench.h"
#include "src/log.h"
#include "src/nvrtc.h"
#include "src/text_util.h"

namespace kdsl::cli {

bool stderr_is_tty() {
  return isatty(STDERR_FILENO) != 0;
}

bool use_color() {
  const char* no_color = std::getenv("NO_COLOR");
  return stderr_is_tty() && !(no_color && *no_color);
}

bool have_gpu(std::string* why) {
  std::string reason;
  if (!driver_or_null(&reason)) {
    if (why) *why = reason.empty() ? "no CUDA driver" : reason;
    return false;
  }
  if (device_count() == 0) {
    if (why) *why = "the CUDA driver reports no device";
    return false;
  }
  return true;
}

void print_note(const std::string& note) {
  if (!note.empty() && log().should_log(spdlog::level::warn)) {
    // A note may name a file or a folder: shown terminal-safe, as errors are.
    std::cerr << "kdsl: note: " << terminal_safe(note) << "\n";
  }
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

CLI::Option* add_list_option(CLI::App& app, const std::string& name, std::vector<std::string>& into,
                             const std::string& help) {
  return app.add_option(name, into, help)->allow_extra_args(false);
}

CLI::Validator not_blank(const std::string& message) {
  return CLI::Validator(
      [message](std::string& text) -> std::string {
        return trim_blanks(text).empty() ? message : "";
      },
      "");
}

CLI::Option* add_seed_option(CLI::App& app, uint64_t& into) {
  CLI::Validator range(
      [](std::string& text) -> std::string {
        uint64_t v = 0;
        const char* end = text.data() + text.size();
        auto [at, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || at != end) {
          return fmt::format("Value {} not in range 0 to {}", text, UINT64_MAX);
        }
        return "";
      },
      fmt::format("UINT in [0 - {}]", UINT64_MAX));
  return app.add_option("--seed", into, "Seed of the random inputs (default 0)")->check(range);
}

CLI::Option* add_warmup_ms_option(CLI::App& app, double& into, const std::string& help_suffix) {
  CLI::Validator range(
      [](std::string& text) -> std::string {
        // from_chars, as --seed: no leading spaces, no hexadecimal (strtod took " 5" and 0x10).
        double v = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
        if (text.empty() || ec != std::errc() || at != end || !(v >= 0 && v <= 10000)) {
          return fmt::format("Value {} not in range 0.0 to 10000.0", text);  // also NaN
        }
        return "";
      },
      "FLOAT in [0 - 10000]");
  return app
      .add_option("--warmup-ms", into,
                  fmt::format("Warm up for at least this many milliseconds of GPU time, as "
                              "triton.testing.do_bench does{} (default {:g}; 0: the --warmup runs "
                              "only)",
                              help_suffix, kMinWarmupMs))
      ->check(range);
}

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t next = text.find(sep, pos);
    out.push_back(text.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

std::string all_dtype_names() {
  std::string s;
  for (DType t : kAllDTypes) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

std::vector<DType> parse_dtype_list_text(const std::string& text, const std::string& option) {
  std::vector<DType> out;
  for (const std::string& name : split_list(text)) {
    // An empty item (`--dtype f32,`, a trailing comma) is malformed, as in --shape and --arch.
    if (name.empty()) throw UsageError(fmt::format("{} '{}': empty entry", option, text));
    auto t = parse_dtype(name);
    if (!t) {
      throw UsageError(
          fmt::format("{}: unknown dtype '{}' (dtypes: {})", option, name, all_dtype_names()));
    }
    if (std::find(out.begin(), out.end(), *t) == out.end()) out.push_back(*t);
  }
  return out;
}

std::string domain_text(const GenericInfo& g) {
  std::string s;
  for (DType t : g.domain) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

bool allows(const GenericInfo& g, DType t) {
  return std::find(g.domain.begin(), g.domain.end(), t) != g.domain.end();
}

std::string kernel_names(const FrontEnd& fe) {
  std::string names;
  for (const auto& k : fe.kernels) names += (names.empty() ? "" : ", ") + k.name;
  return names.empty() ? "none" : names;
}

std::string symbol_names(const KernelSignature& sig) {
  std::string s;
  for (const ir::Symbol& sym : sig.symbols) s += (s.empty() ? "" : ", ") + sym.name;
  return s.empty() ? "none" : s;
}

bool has_symbol(const KernelSignature& sig, const std::string& name) {
  return std::any_of(sig.symbols.begin(), sig.symbols.end(),
                     [&](const ir::Symbol& s) { return s.name == name; });
}

}  // namespace

const char* error_prefix(const std::string& error) {
  return error.find(": error: ") != std::string::npos ? "" : "kdsl: error: ";
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out = split(text, ',');
  for (std::string& item : out) item = trim_blanks(item);
  return out;
}

ShapeLists parse_shape_lists(const std::vector<std::string>& options) {
  ShapeLists out;
  const auto bad = [](const std::string& item, const std::string& why) {
    return UsageError(
        fmt::format("bad --shape entry '{}': {}; e.g. --shape M=1024,N=4096,8192", item, why));
  };
  for (const std::string& text : options) {
    std::string current;  // the symbol bare numbers continue
    // Spaces around entries, names and sizes are ignored, as in --schedule.
    for (const std::string& entry : split(text, ',')) {
      const std::string item = trim_blanks(entry);
      if (item.empty()) throw bad(entry, "empty entry");
      size_t eq = item.find('=');
      std::string value = item;
      if (eq != std::string::npos) {
        current = trim_blanks(item.substr(0, eq));
        value = trim_blanks(item.substr(eq + 1));
        bool ident = !current.empty() && !std::isdigit(static_cast<unsigned char>(current[0])) &&
                     std::all_of(current.begin(), current.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                     });
        if (!ident) throw bad(item, "expected NAME=SIZE");
        if (out.count(current)) throw UsageError(fmt::format("--shape sets {} twice", current));
        out[current];
      } else if (current.empty()) {
        throw bad(item, "a size needs a NAME= before it");
      }
      int64_t v = -1;
      size_t used = 0;
      try {
        v = std::stoll(value, &used);
      } catch (const std::out_of_range&) {
        throw bad(item, "a size is at most 9223372036854775807 (2^63 - 1)");
      } catch (const std::exception&) {
        used = 0;
      }
      if (value.empty() || used != value.size() || v < 0) {
        throw bad(item, "a size is a non-negative integer");
      }
      std::vector<int64_t>& values = out[current];
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
  }
  return out;
}

DtypeRequest parse_dtype_request(const std::string& dtype,
                                 const std::vector<std::string>& defines) {
  DtypeRequest r;
  if (!dtype.empty()) r.only = parse_dtype_list_text(dtype, "--dtype");
  r.only_text = dtype;
  for (const std::string& d : defines) {
    size_t eq = d.find('=');
    // Spaces around the name are ignored, as around --shape's names and the dtypes (-D "T = bf16"
    // said "kernel 'k' has no generic named T ", found by a new-user test).
    std::string name = eq == std::string::npos ? "" : trim_blanks(d.substr(0, eq));
    if (eq == std::string::npos || name.empty() || trim_blanks(d.substr(eq + 1)).empty()) {
      throw UsageError(fmt::format("bad -D '{}': expected GENERIC=DTYPE, e.g. -D T=bf16", d));
    }
    if (r.named.count(name)) throw UsageError(fmt::format("-D sets {} twice", name));
    r.named[name] = parse_dtype_list_text(d.substr(eq + 1), "-D " + name);
  }
  return r;
}

std::vector<std::vector<DType>> bindings_for(const KernelSignature& sig, const DtypeRequest& req,
                                             bool whole_domain, bool strict) {
  std::map<std::string, std::vector<DType>> given = req.named;
  if (!req.only.empty()) {
    if (sig.generics.size() == 1) {
      if (given.count(sig.generics[0].name)) {
        throw UsageError(fmt::format("--dtype and -D {} both set {}", sig.generics[0].name,
                                     sig.generics[0].name));
      }
      given[sig.generics[0].name] = req.only;
    } else if (strict || sig.generics.size() > 1) {
      throw ArgumentError(fmt::format(
          "--dtype needs a kernel with exactly one generic; '{}' has {}{}", sig.name,
          sig.generics.size(), sig.generics.empty() ? "" : " (use -D NAME=DTYPE for each)"));
    }
  }
  if (strict) {
    for (const auto& [name, list] : given) {
      bool known = std::any_of(sig.generics.begin(), sig.generics.end(),
                               [&n = name](const GenericInfo& g) { return g.name == n; });
      if (!known) {
        throw ArgumentError(fmt::format("kernel '{}' has no generic named {}", sig.name, name));
      }
    }
  }
  std::vector<std::vector<DType>> out = {{}};
  for (const GenericInfo& g : sig.generics) {
    std::vector<DType> choices;
    auto it = given.find(g.name);
    if (it == given.end()) {
      if (!whole_domain) {
        throw UsageError(
            fmt::format("kernel '{}' needs a dtype for {} (one of {}): add --dtype "
                        "or -D {}=DTYPE",
                        sig.name, g.name, domain_text(g), g.name));
      }
      choices = g.domain;
    } else {
      for (DType t : it->second) {
        if (allows(g, t)) {
          choices.push_back(t);
        } else if (strict) {
          throw ArgumentError(fmt::format("kernel '{}' does not allow {} = {} (allowed: {})",
                                          sig.name, g.name, dtype_name(t), domain_text(g)));
        }
      }
    }
    std::vector<std::vector<DType>> next;
    for (const auto& prefix : out) {
      for (DType t : choices) {
        next.push_back(prefix);
        next.back().push_back(t);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string binding_text(const KernelSignature& sig, const std::vector<DType>& binding) {
  if (binding.size() == 1) return std::string(dtype_name(binding[0]));
  std::string s;
  for (size_t g = 0; g < binding.size(); ++g) {
    s += fmt::format("{}{}={}", g ? "," : "", sig.generics[g].name, dtype_name(binding[g]));
  }
  return s.empty() ? "-" : s;
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string shape_values_text(const std::map<std::string, int64_t>& shape) {
  std::string s;
  for (const auto& [name, v] : shape) s += fmt::format("{}{}={}", s.empty() ? "" : ",", name, v);
  return s.empty() ? "-" : s;
}

namespace {

// Adds --schedule. An empty string means the option was not given, so a given value that is empty
// or only blanks (`--schedule ""`, a variable that expanded to nothing) is refused here rather
// than read as no hint, as --shape "" is refused.
void add_schedule_option(CLI::App& app, std::string& into, const std::string& help) {
  app.add_option("--schedule", into, help)
      ->type_name("KEY=INTEGER,...")
      ->check(not_blank("empty schedule hint: expected KEY=INTEGER items separated by commas, e.g. "
                        "group=512,prefetch=1"));
}

}  // namespace

void add_kernel_options(CLI::App& app, KernelOptions& o, bool with_arch, bool with_schedule) {
  app.add_option("file", o.file, "The .kdsl file")->required();
  app.add_option("-k,--kernel", o.kernel, "Kernel name (kdsl list FILE shows them)")
      ->required()
      ->check(not_blank("empty kernel name: expected one, e.g. -k rms_norm"));
  app.add_option("--dtype", o.dtype, "Dtype of the kernel's only generic: f32, f16, bf16, ...")
      ->check(not_blank("empty dtype: expected one, e.g. bf16"));
  add_list_option(app, "-D", o.defines, "Bind a generic by name: -D T=bf16 (repeatable)");
  add_list_option(app, "--shape", o.shape,
                  "Shape symbol values: --shape M=1024,N=8192 (repeatable)");
  if (with_arch) {
    app.add_option("--arch", o.arch,
                   "GPU architecture to compile for, e.g. sm_90 (default: this GPU's, else sm_90)")
        ->check(not_blank("empty architecture: expected one, e.g. sm_90"));
  }
  if (!with_schedule) return;
  add_schedule_option(
      app, o.schedule,
      "Override the scheduler (expert). Row kernels: vec=, group=, cache_rows=, "
      "cache_invariant=, prefetch=, pack=, stream=, persistent=, smem_columns=, "
      "butterfly= (0: the warps' partials added in order), min_ctas=, cluster= (CTAs per "
      "row, sm_90+), stage= (rows staged in shared "
      "memory: 0, 2 to 8), unroll= (chunks per step of a streamed phase's loop; 0: all), "
      "online= (1: a sum of exp(x - max) in the max's pass), push= (a cluster row's "
      "pushed partials, 0 to 3: +1 lane q pushes to CTA q, +2 a point's states packed), "
      "reread= (1: staged rows read from shared memory by each phase); "
      "e.g. group=512,prefetch=1. Scan kernels: t= (steps), lp= "
      "(lanes along the positions), wp= (warps along them), vr= (rows per access); "
      "e.g. t=8,lp=4,vr=4");
}

std::shared_ptr<const FrontEnd> load_module(const std::string& path) {
  auto t0 = std::chrono::steady_clock::now();
  auto fe = run_front_end(SourceFile::read(path));
  log().info(
      "{}: parsed and checked in {:.1f} ms ({} kernel{})", path,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
      fe->kernels.size(), fe->kernels.size() == 1 ? "" : "s");
  return fe;
}

Selected select_kernel(const std::string& file, const std::string& kernel) {
  if (kernel.find(',') != std::string::npos) {
    throw UsageError(fmt::format(
        "-k {}: this command takes one kernel (kdsl compile and kdsl bench take lists)", kernel));
  }
  Selected s;
  s.fe = load_module(file);
  s.sig = s.fe->find(kernel);
  if (!s.sig) {
    throw ArgumentError(
        fmt::format("no kernel named '{}' in {} (kernels: {})", kernel, file, kernel_names(*s.fe)));
  }
  return s;
}

std::vector<DType> single_binding(const KernelSignature& sig, const KernelOptions& o) {
  auto bindings = bindings_for(sig, parse_dtype_request(o.dtype, o.defines), false, true);
  if (bindings.size() != 1) {
    throw UsageError(
        fmt::format("this command takes one dtype per generic, got {} combinations "
                    "(kdsl compile and kdsl bench take lists)",
                    bindings.size()));
  }
  return bindings[0];
}

std::map<std::string, int64_t> single_shape(const KernelSignature& sig, const KernelOptions& o) {
  std::map<std::string, int64_t> out;
  for (const auto& [name, values] : parse_shape_lists(o.shape)) {
    if (!has_symbol(sig, name)) {
      throw ArgumentError(fmt::format("kernel '{}' has no shape symbol {} (symbols: {})", sig.name,
                                      name, symbol_names(sig)));
    }
    if (values.size() != 1) {
      throw UsageError(
          fmt::format("this command takes one value per shape symbol, got {} for {} "
                      "(kdsl compile and kdsl bench take lists)",
                      values.size(), name));
    }
    out[name] = values[0];
  }
  return out;
}

void require_shapes(const KernelSignature& sig, const std::map<std::string, int64_t>& shape,
                    bool from_inputs) {
  for (const ir::Symbol& s : sig.symbols) {
    if (!shape.count(s.name)) {
      throw UsageError(fmt::format(
          "kernel '{}' needs a value for shape symbol {}: add --shape "
          "{}=SIZE{}",
          sig.name, s.name, s.name, from_inputs ? " (or an --in file that has it)" : ""));
    }
  }
}

DeviceTarget target_for(const std::string& arch_text, std::string* note) {
  DeviceTarget t;
  // Blanks around the name are ignored, as in compile's list (" sm_90" was 'NVRTC does not
  // compile for it' in emit, run and tune; found by a new-user test).
  const std::string arch = trim_blanks(arch_text);
  if (!arch.empty()) {
    if (arch.find(',') != std::string::npos) {
      throw UsageError(fmt::format(
          "--arch {}: this command takes one architecture (kdsl compile takes a list)", arch));
    }
    if (!nvrtc_supports_arch(arch)) {
      throw UsageError(
          fmt::format("--arch {}: NVRTC {} does not compile for it (supported: {}; "
                      "suffix 'a' from sm_90, 'f' from sm_100)",
                      arch, nvrtc_version(), fmt::join(nvrtc_supported_archs(), ", ")));
    }
    return target_for_arch(arch);
  }
  if (have_gpu(nullptr)) {
    DeviceInfo info = device_info(0);
    t.name = info.name;
    t.arch = info.arch;
    t.sm_count = info.sm_count;
    t.max_threads_per_sm = info.max_threads_per_sm;
    t.max_smem_per_cta = info.max_smem_per_block_optin;
    log().info("compiling for GPU 0, {} ({}, {} SMs)", info.name, info.arch, info.sm_count);
    return t;
  }
  if (note) *note = "no GPU found: compiling for sm_90 (an H100/H200); choose another with --arch";
  return t;
}

namespace {

// The layout masks of a launch with row-major tensors (what kdsl run creates, and a fresh PyTorch
// tensor is), with the sizes in `shape` and the others taken as set_row_major_masks says.
void set_masks(Specialization& spec, const KernelSignature& sig,
               const std::map<std::string, int64_t>& shape) {
  std::vector<int64_t> sizes;
  for (const ir::Symbol& s : sig.symbols) {
    auto it = shape.find(s.name);
    sizes.push_back(it != shape.end() ? it->second : -1);
  }
  set_row_major_masks(spec, sig, sizes);
}

}  // namespace

Specialization spec_from(const KernelSignature& sig, const KernelOptions& o, bool need_vector) {
  Specialization spec;
  spec.binding = single_binding(sig, o);
  auto shape = single_shape(sig, o);
  if (sig.vector_symbol >= 0) {
    const std::string& n = sig.symbols[sig.vector_symbol].name;
    auto it = shape.find(n);
    if (it != shape.end()) {
      spec.vector_extent = it->second;
    } else if (need_vector) {
      throw UsageError(
          fmt::format("kernel '{}' specializes {} (a compile-time constant): give "
                      "its value, e.g. --shape {}=8192",
                      sig.name, n, n));
    }
  }
  set_masks(spec, sig, shape);
  return spec;
}

ScheduleHint parse_schedule(const std::string& text) {
  try {
    return ScheduleHint::parse(text);
  } catch (const ArgumentError& e) {
    throw UsageError(fmt::format("--schedule: {}", e.what()));
  }
}

// ---------------------------------------------------------------------------------------------
// Lists of specializations

void add_spec_list_options(CLI::App& app, SpecListOptions& o) {
  app.add_option("file", o.file, "The .kdsl file")->required();
  // A given -k that is empty or blank (a variable that expanded to nothing) is refused, not read
  // as "every kernel", as --schedule "" is refused (found by a new-user test).
  app.add_option("-k,--kernel", o.kernels,
                 "Kernels, comma-separated (default: every kernel of the file)")
      ->check(not_blank("empty kernel list: expected one or more, e.g. -k rms_norm,rms_norm_bwd"));
  app.add_option("--dtype", o.dtype,
                 "Dtypes of each kernel's only generic, comma-separated: --dtype f32,f16,bf16 "
                 "(default: every dtype the kernel allows)");
  add_list_option(app, "-D", o.defines, "Dtypes of a generic by name: -D T=f16,bf16 (repeatable)");
  add_list_option(app, "--shape", o.shape,
                  "Shape symbol values, lists allowed: --shape M=4096,N=1024,4096,8192 "
                  "(repeatable; every combination is used)");
  add_schedule_option(app, o.schedule, "Override the scheduler (expert), as for kdsl run");
}

namespace {

// The kernels -k names (every kernel when empty).
std::vector<const KernelSignature*> selected_kernels(const FrontEnd& fe, const SpecListOptions& o) {
  std::vector<const KernelSignature*> out;
  if (o.kernels.empty()) {
    for (const auto& k : fe.kernels) out.push_back(&k);
    if (out.empty()) throw ArgumentError(fmt::format("{} has no kernels", o.file));
    return out;
  }
  for (const std::string& name : split_list(o.kernels)) {
    // An empty item (`-k rms_norm,`) is malformed (exit code 2), not a kernel named ''.
    if (name.empty()) throw UsageError(fmt::format("-k '{}': empty entry", o.kernels));
    const KernelSignature* sig = fe.find(name);
    if (!sig) {
      throw ArgumentError(
          fmt::format("no kernel named '{}' in {} (kernels: {})", name, o.file, kernel_names(fe)));
    }
    if (std::find(out.begin(), out.end(), sig) == out.end()) out.push_back(sig);
  }
  return out;
}

// Every combination of the lists of `names` (in map order).
std::vector<std::map<std::string, int64_t>> product(const ShapeLists& lists,
                                                    const std::vector<std::string>& names) {
  std::vector<std::map<std::string, int64_t>> out = {{}};
  for (const std::string& n : names) {
    std::vector<std::map<std::string, int64_t>> next;
    for (const auto& prefix : out) {
      for (int64_t v : lists.at(n)) {
        next.push_back(prefix);
        next.back()[n] = v;
      }
    }
    out = std::move(next);
  }
  return out;
}

}  // namespace

SpecList expand_specs(const SpecListOptions& o, bool all_symbols) {
  SpecList list;
  list.fe = load_module(o.file);
  std::vector<const KernelSignature*> kernels = selected_kernels(*list.fe, o);
  const bool strict = !o.kernels.empty() && kernels.size() == 1;
  DtypeRequest req = parse_dtype_request(o.dtype, o.defines);
  ShapeLists shapes = parse_shape_lists(o.shape);
  for (const auto& [name, values] : shapes) {
    bool known = std::any_of(kernels.begin(), kernels.end(),
                             [&n = name](const KernelSignature* k) { return has_symbol(*k, n); });
    if (!known) {
      throw ArgumentError(
          fmt::format("no selected kernel has a shape symbol {} (symbols of '{}': {})", name,
                      kernels[0]->name, symbol_names(*kernels[0])));
    }
  }
  for (const auto& [name, list] : req.named) {
    // (Structured bindings are captured through an init-capture: clang 14 refuses them bare.)
    bool known = std::any_of(kernels.begin(), kernels.end(), [&n = name](const KernelSignature* k) {
      return std::any_of(k->generics.begin(), k->generics.end(),
                         [&](const GenericInfo& g) { return g.name == n; });
    });
    if (!known)
      throw ArgumentError(fmt::format("-D {}: no selected kernel has a generic {}", name, name));
  }
  std::vector<DType> unused = req.only;  // --dtype values no kernel allows
  bool any_single_generic = false;
  for (const KernelSignature* sig : kernels) {
    std::vector<std::string> needed;
    for (size_t s = 0; s < sig->symbols.size(); ++s) {
      const std::string& name = sig->symbols[s].name;
      if (!all_symbols && static_cast<int>(s) != sig->vector_symbol) continue;
      if (!shapes.count(name)) {
        throw UsageError(
            fmt::format("kernel '{}' needs a value for {}{}: add --shape {}=SIZE", sig->name, name,
                        all_symbols ? "" : " (specialized: a compile-time constant)", name));
      }
      needed.push_back(name);
    }
    auto bindings = bindings_for(*sig, req, true, strict);
    any_single_generic |= sig->generics.size() == 1;
    for (const auto& binding : bindings) {
      if (binding.size() == 1) std::erase(unused, binding[0]);
      for (auto& shape : product(shapes, needed)) {
        SpecRequest r;
        r.sig = sig;
        r.spec.binding = binding;
        if (sig->vector_symbol >= 0) {
          r.spec.vector_extent = shape.at(sig->symbols[sig->vector_symbol].name);
        }
        set_masks(r.spec, *sig, shape);
        r.shape = std::move(shape);
        list.specs.push_back(std::move(r));
      }
    }
  }
  if (!req.only.empty() && !any_single_generic) {
    throw ArgumentError("--dtype: no selected kernel has a generic (a dtype parameter)");
  }
  if (!unused.empty()) {
    throw ArgumentError(fmt::format("--dtype {}: no selected kernel allows {}", req.only_text,
                                    dtype_name(unused[0])));
  }
  if (list.specs.empty()) throw ArgumentError("the options name no specialization");
  return list;
}

void parallel_for(size_t n, size_t threads, const std::function<void(size_t)>& body) {
  threads = std::clamp<size_t>(threads, 1, std::max<size_t>(n, 1));
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr first;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace kdsl::cli
