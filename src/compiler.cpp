#include "compiler.h"
#include "log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>

#include "codegen_scan.h"
#include "dsl/parser.h"
#include "kdsl/error.h"
#include "nvrtc.h"

namespace kdsl {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const KernelSignature* FrontEnd::find(const std::string& name) const {
  for (const auto& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::shared_ptr<const FrontEnd> run_front_end(std::shared_ptr<const SourceFile> file) {
  auto fe = std::make_shared<FrontEnd>();
  fe->file = file;
  Diagnostics diags;
  fe->ast = parse_module(file, diags);
  diags.throw_if_errors();
  check_module(*fe->ast, diags);
  diags.throw_if_errors();
  fe->kernels = kernel_signatures(*fe->ast, diags);
  diags.throw_if_errors();
  return fe;
}

ir::Kernel lower_specialized(const FrontEnd& fe, const std::string& name,
                             const Specialization& spec) {
  Diagnostics diags;
  std::optional<ir::Kernel> k = lower_kernel(*fe.ast, name, spec.binding, diags);
  diags.throw_if_errors();
  if (!k)
    throw InternalError(fmt::format("lowering kernel '{}' failed without a diagnostic", name));
  specialize(*k, spec);
  if (debug_enabled()) log().info("IR after sema and specialization:\n{}", ir::print(*k));
  return std::move(*k);
}

GeneratedKernel generate(const ir::Kernel& k, const Specialization& spec,
                         const DeviceTarget& target, const ScheduleHint& hint) {
  // 16-bit values are converted with cvt.rn.{bf16,f16}x2.f32 (sm_80 and newer).
  for (const ir::TensorParam& t : k.tensors) {
    if ((t.dtype == DType::bf16 || t.dtype == DType::f16) && compute_capability(target) < 80) {
      throw ArgumentError(fmt::format("{}: {} tensors need sm_80 or newer; the target is {}",
                                      k.name, dtype_name(t.dtype), target.arch));
    }
  }
  if (needs_scan_schedule(k)) {
    ScanSchedule s = choose_scan_schedule(k, spec, target, hint);
    if (debug_enabled()) {
      std::string why;
      for (const auto& r : s.reasons) why += "\n  " + r;
      log().info("schedule {} for {}:{}", s.name, k.name, why);
    }
    return generate_scan_kernel(k, spec, s);
  }
  RowSchedule s = choose_row_schedule(k, spec, target, hint);
  if (debug_enabled()) {
    std::string why;
    for (const auto& r : s.reasons) why += "\n  " + r;
    log().info("schedule {} for {}:{}", s.name, k.name, why);
  }
  return generate_rows_kernel(k, spec, s);
}

namespace {
// Options beyond nvrtc_options' defaults: line info, so profilers map time to the generated source.
const std::vector<std::string> kExtraOptions = {"-lineinfo"};
}  // namespace

std::vector<std::string> kdsl_nvrtc_options(const std::string& arch) {
  return nvrtc_options(arch, kExtraOptions);
}

std::string generate_ptx(const GeneratedKernel& gen, const std::string& arch) {
  return nvrtc_compile_ptx(gen.source, gen.plan.symbol + ".cu", arch, kExtraOptions);
}

CompiledKernel compile_kernel(const FrontEnd& fe, const std::string& name,
                              const Specialization& spec, const DeviceTarget& target,
                              DiskCache* cache, const ScheduleHint& hint) {
  auto t0 = std::chrono::steady_clock::now();
  CompiledKernel out;
  out.ir = lower_specialized(fe, name, spec);
  out.gen = generate(out.ir, spec, target, hint);
  out.frontend_ms = ms_since(t0);
  CacheKeyInputs key;
  key.source = out.gen.source;
  key.options = kdsl_nvrtc_options(target.arch);
  key.arch = target.arch;
  key.nvrtc_version = nvrtc_version();
  key.kdsl_version = KDSL_VERSION;
  key.kernel_symbol = out.gen.plan.symbol;
  const std::string& symbol = out.gen.plan.symbol;
  const std::string& source = out.gen.source;
  const std::string& arch = target.arch;
  auto compile = [&]() { return nvrtc_compile(source, symbol + ".cu", arch, kExtraOptions).data; };
  DiskCache& c = cache ? *cache : default_disk_cache();
  out.binary = c.get_or_compile(key, out.gen.plan.to_json(), compile);
  log().info("{} {} for {}: {:.1f} ms front end, {}", symbol,
             out.binary.hit ? "loaded from the disk cache" : "compiled", arch, out.frontend_ms,
             out.binary.hit ? fmt::format("{:.2f} ms cache", out.binary.load_ms)
                            : fmt::format("{:.1f} ms NVRTC", out.binary.compile_ms));
  return out;
}

}  // namespace kdsl
