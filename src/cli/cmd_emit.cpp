// kdsl emit, kdsl compile.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "src/nvrtc.h"

namespace kdsl::cli {
namespace {

// The specialization the options describe, assuming 16-byte aligned, contiguous tensors.
Specialization spec_from(const KernelSignature& sig, const KernelOptions& o, bool need_vector) {
  Specialization spec;
  spec.binding = resolve_binding(sig, o);
  auto shapes = parse_shape(o.shape);
  if (sig.vector_symbol >= 0) {
    const std::string& n = sig.symbols[sig.vector_symbol].name;
    auto it = shapes.find(n);
    if (it != shapes.end()) {
      spec.vector_extent = it->second;
    } else if (need_vector) {
      throw UsageError(fmt::format("{} is specialized (a compile-time constant); give its value, e.g. "
                                   "--shape {}=8192",
                                   n, n));
    }
  }
  spec.aligned_mask = spec.contiguous_mask = ~0u;
  return spec;
}

}  // namespace

Command register_emit(CLI::App& app) {
  struct Opts {
    KernelOptions k;
    bool ir = false, cuda = false, explain = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("emit", "Print a stage's output for one specialization");
  add_kernel_options(*sub, o->k, true);
  auto* g = sub->add_option_group("stage");
  g->add_flag("--ir", o->ir, "The typed IR (after sema and specialization)");
  g->add_flag("--cuda", o->cuda, "The generated CUDA C++ (default)");
  g->require_option(0, 1);
  sub->add_flag("--explain", o->explain, "The chosen schedule and why");
  sub->footer("Example: kdsl emit stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape N=8192 --cuda");
  return {sub, [o]() {
            Selected s = select_kernel(o->k);
            Specialization spec = spec_from(*s.sig, o->k, !o->ir);
            ir::Kernel k = lower_specialized(*s.fe, o->k.kernel, spec);
            if (o->ir) {
              std::cout << ir::print(k);
              return kOk;
            }
            std::string note;
            DeviceTarget target = target_for(o->k.arch, &note);
            GeneratedKernel gen = generate(k, spec, target, ScheduleHint::parse(o->k.schedule));
            if (o->explain) {
              std::cout << fmt::format("{}: schedule {}\n", gen.plan.symbol, gen.plan.schedule);
              for (const auto& r : gen.plan.reasons) std::cout << "  " << r << "\n";
              if (!o->cuda) return kOk;
            }
            std::cout << gen.source;
            return kOk;
          }};
}

Command register_compile(CLI::App& app) {
  auto o = std::make_shared<KernelOptions>();
  CLI::App* sub = app.add_subcommand("compile", "Compile a specialization into the disk cache");
  add_kernel_options(*sub, *o, true);
  sub->footer("Example: kdsl compile stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape N=8192 "
              "--arch sm_90");
  return {sub, [o]() {
            Selected s = select_kernel(*o);
            Specialization spec = spec_from(*s.sig, *o, true);
            std::string note;
            DeviceTarget target = target_for(o->arch, &note);
            if (!note.empty()) std::cerr << "kdsl: note: " << note << "\n";
            CompiledKernel ck =
                compile_kernel(*s.fe, o->kernel, spec, target, nullptr, ScheduleHint::parse(o->schedule));
            if (ck.binary.hit) {
              std::cout << fmt::format("{} ({}): disk cache hit in {:.2f} ms (front end {:.2f} ms)\n",
                                       ck.gen.plan.symbol, target.arch, ck.binary.load_ms, ck.frontend_ms);
            } else {
              std::cout << fmt::format("{} ({}): compiled in {:.1f} ms by NVRTC {} (front end {:.2f} ms), "
                                       "stored in the disk cache\n",
                                       ck.gen.plan.symbol, target.arch, ck.binary.compile_ms,
                                       nvrtc_version(), ck.frontend_ms);
            }
            return kOk;
          }};
}

}  // namespace kdsl::cli
