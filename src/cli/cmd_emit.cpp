// kdsl emit: one specialization's IR, CUDA C++, PTX or SASS, and its schedule with reasons.
#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "disasm.h"
#include "src/nvrtc.h"

namespace kdsl::cli {
namespace {

struct EmitOptions {
  KernelOptions k;
  bool ir = false, cuda = false, ptx = false, sass = false, explain = false;
};

int emit(const EmitOptions& o) {
  if (o.ir && o.explain) {
    throw UsageError(
        "--explain shows the schedule of the generated code: use it alone or with "
        "--cuda, --ptx or --sass, not --ir");
  }
  if (o.ir && !o.k.schedule.empty()) {
    // The IR comes before scheduling: a hint would be ignored, and one that cannot apply would
    // go unreported.
    throw UsageError(
        "--schedule chooses the schedule of the generated code: use it with --cuda, --ptx, "
        "--sass or --explain, not --ir");
  }
  // A malformed --arch before the kernel and its shapes (as kdsl compile and run check it).
  if (!o.k.arch.empty()) target_for(o.k.arch, nullptr);
  std::optional<Disassembler> dis;
  if (o.sass) {
    dis = find_disassembler();
    if (!dis) throw Error(no_disassembler_message());
  }
  Selected s = select_kernel(o.k.file, o.k.kernel);
  Specialization spec = spec_from(*s.sig, o.k, !o.ir);
  ScheduleHint hint = parse_schedule(o.k.schedule);
  ir::Kernel k = lower_specialized(*s.fe, o.k.kernel, spec);
  if (o.ir) {
    std::cout << ir::print(k);
    return kOk;
  }
  std::string note;
  DeviceTarget target = target_for(o.k.arch, &note);
  GeneratedKernel gen = generate(k, spec, target, hint);
  print_note(note);
  if (o.explain) {
    std::cout << fmt::format("{} for {}: schedule {}\n", gen.plan.symbol, target.arch,
                             gen.plan.schedule);
    for (const auto& r : gen.plan.reasons) std::cout << "  " << r << "\n";
    if (!o.cuda && !o.ptx && !o.sass) return kOk;
  }
  if (o.ptx) {
    std::cout << generate_ptx(gen, target.arch);
    return kOk;
  }
  if (o.sass) {
    CompiledKernel ck = compile_kernel(*s.fe, o.k.kernel, spec, target, nullptr, hint);
    std::cout.flush();
    return disassemble(*dis, ck.binary.cubin, ck.gen.plan.symbol);
  }
  std::cout << gen.source;
  return kOk;
}

}  // namespace

Command register_emit(CLI::App& app) {
  auto o = std::make_shared<EmitOptions>();
  CLI::App* sub = app.add_subcommand("emit", "Print a stage's output for one specialization");
  add_kernel_options(*sub, o->k);
  auto* g = sub->add_option_group("stage", "What to print (one of them; default --cuda)");
  g->add_flag("--ir", o->ir, "The typed IR after sema and specialization (N may stay symbolic)");
  g->add_flag("--cuda", o->cuda, "The generated CUDA C++ (the default)");
  g->add_flag("--ptx", o->ptx, "The PTX NVRTC makes of it (needs no GPU)");
  g->add_flag("--sass", o->sass,
              "The SASS of the cubin, through the CUDA toolkit's cuobjdump or nvdisasm");
  g->require_option(0, 1);
  sub->add_flag("--explain", o->explain,
                "The chosen schedule and why (alone, or before --cuda, --ptx or --sass)");
  sub->footer(
      "The tensors are taken to be row-major at 16-byte aligned addresses (what a fresh PyTorch "
      "tensor is; a vector axis that is not a tensor's last is strided), sizes not given taken as "
      "more than 1 and a multiple of 16 bytes; without a GPU and --arch the target is sm_90. SASS "
      "needs cuobjdump or nvdisasm in "
      "$CUDA_HOME/bin, $CUDA_PATH/bin, PATH or /usr/local/cuda/bin.\n"
      "Examples:\n"
      "  kdsl emit stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape N=8192 --cuda\n"
      "  kdsl emit stdlib/rms_norm.kdsl -k rms_norm -D T=bf16 --shape N=8192 --explain --ptx");
  return {sub, [o]() { return emit(*o); }};
}

}  // namespace kdsl::cli
