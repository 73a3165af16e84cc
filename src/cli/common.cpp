#include <fmt/format.h>
#include <unistd.h>

#include "cli.h"
#include "src/driver.h"

namespace kdsl::cli {

bool stderr_is_tty() { return isatty(STDERR_FILENO) != 0; }

void add_kernel_options(CLI::App& app, KernelOptions& o, bool need_kernel) {
  app.add_option("file", o.file, "The .kdsl file")->required();
  auto* k = app.add_option("-k,--kernel", o.kernel, "Kernel name (kdsl list FILE shows them)");
  if (need_kernel) k->required();
  app.add_option("--dtype", o.dtype, "Dtype of the kernel's generic (f32, f16, bf16, ...)");
  app.add_option("-D", o.defines, "Bind a generic: -D T=bf16 (repeatable)");
  app.add_option("--shape", o.shape, "Shape symbols: --shape M=1024,N=8192");
  app.add_option("--arch", o.arch, "GPU architecture to compile for (default: this GPU's, else sm_90)");
  app.add_option("--schedule", o.schedule,
                 "Override the scheduler (expert): vec=, group=, cache_rows=, cache_invariant=, "
                 "prefetch=, pack=, e.g. --schedule group=512,prefetch=1");
}

std::map<std::string, int64_t> parse_shape(const std::string& text) {
  std::map<std::string, int64_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    int64_t v = -1;
    size_t used = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (name.empty() || eq == std::string::npos || used != value.size() || value.empty() || v < 0) {
      throw UsageError(fmt::format("bad --shape entry '{}': expected NAME=SIZE with SIZE a "
                                   "non-negative integer, e.g. --shape M=1024,N=8192",
                                   item));
    }
    if (out.count(name)) throw UsageError(fmt::format("--shape sets {} twice", name));
    out[name] = v;
  }
  return out;
}

std::vector<DType> resolve_binding(const KernelSignature& sig, const KernelOptions& o) {
  std::map<std::string, std::string> given;
  for (const std::string& d : o.defines) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(fmt::format("bad -D '{}': expected GENERIC=DTYPE, e.g. -D T=bf16", d));
    }
    given[d.substr(0, eq)] = d.substr(eq + 1);
  }
  if (!o.dtype.empty()) {
    if (sig.generics.size() != 1) {
      throw UsageError(fmt::format("--dtype needs a kernel with exactly one generic; '{}' has {}{}",
                                   sig.name, sig.generics.size(),
                                   sig.generics.empty() ? "" : " (use -D NAME=DTYPE)"));
    }
    given[sig.generics[0].name] = o.dtype;
  }
  std::vector<DType> binding;
  for (const GenericInfo& g : sig.generics) {
    std::string allowed;
    for (DType t : g.domain) allowed += (allowed.empty() ? "" : ", ") + std::string(dtype_name(t));
    auto it = given.find(g.name);
    if (it == given.end()) {
      throw UsageError(fmt::format("kernel '{}' needs a dtype for {} (one of {}): add --dtype or "
                                   "-D {}=...",
                                   sig.name, g.name, allowed, g.name));
    }
    auto t = parse_dtype(it->second);
    if (!t || std::find(g.domain.begin(), g.domain.end(), *t) == g.domain.end()) {
      throw ArgumentError(fmt::format("kernel '{}' does not allow {} = {} (allowed: {})", sig.name,
                                      g.name, it->second, allowed));
    }
    binding.push_back(*t);
    given.erase(it);
  }
  if (!given.empty()) {
    throw UsageError(fmt::format("kernel '{}' has no generic named {}", sig.name, given.begin()->first));
  }
  return binding;
}

Selected select_kernel(const KernelOptions& o) {
  Selected s;
  s.fe = run_front_end(SourceFile::read(o.file));
  s.sig = s.fe->find(o.kernel);
  if (!s.sig) {
    std::string names;
    for (const auto& k : s.fe->kernels) names += (names.empty() ? "" : ", ") + k.name;
    throw ArgumentError(fmt::format("no kernel named '{}' in {} (kernels: {})", o.kernel, o.file,
                                    names.empty() ? "none" : names));
  }
  return s;
}

DeviceTarget target_for(const std::string& arch, std::string* note) {
  DeviceTarget t;
  if (!arch.empty()) {
    t.arch = arch;
    return t;
  }
  if (driver_or_null() && device_count() > 0) {
    DeviceInfo info = device_info(0);
    t.name = info.name;
    t.arch = info.arch;
    t.sm_count = info.sm_count;
    t.max_threads_per_sm = info.max_threads_per_sm;
    t.max_smem_per_cta = info.max_smem_per_block_optin;
    return t;
  }
  if (note) *note = "no GPU found: compiling for sm_90 (an H100/H200); choose another with --arch";
  return t;
}

}  // namespace kdsl::cli
