#include "fuzz/front_end_input.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "kdsl/error.h"
#include "kdsl/kdsl.h"
#include "src/compiler.h"
#include "src/runtime_impl.h"

namespace kdsl::fuzz {
namespace {

// Vector lengths that reach every row schedule and tail: 1 element, odd sizes, exact powers of two,
// one past a power of two, and rows longer than one CTA can cover in one pass.
constexpr int64_t kVectorLengths[16] = {1,   2,   3,    7,    8,    16,   33,    64,
                                        100, 256, 1000, 1024, 4097, 8192, 12288, 65537};

[[noreturn]] void finding(const char* stage, const std::string& kernel, const std::string& what) {
  std::fprintf(stderr, "kdsl fuzz finding in %s (kernel '%s'): %s\n", stage, kernel.c_str(),
               what.c_str());
  std::fflush(stderr);
  std::abort();
}

DeviceTarget target_for(uint8_t selector) {
  DeviceTarget t;  // sm_90 (H100/H200)
  if (selector & 0x40) {
    t.arch = "sm_80";  // A100: fewer SMs, less shared memory
    t.sm_count = 108;
    t.max_smem_per_cta = 163 * 1024;
  }
  return t;
}

// Every combination of the generics' domains, the first generic varying slowest, at most
// kMaxBindings of them.
std::vector<std::vector<DType>> bindings_of(const KernelSignature& sig) {
  std::vector<std::vector<DType>> out{{}};
  for (const GenericInfo& g : sig.generics) {
    std::vector<std::vector<DType>> next;
    for (const auto& prefix : out) {
      for (DType t : g.domain) {
        if (next.size() >= static_cast<size_t>(kMaxBindings)) break;
        next.push_back(prefix);
        next.back().push_back(t);
      }
    }
    out = std::move(next);
  }
  return out;
}

void run_kernel(const FrontEnd& fe, const KernelSignature& sig, const std::vector<DType>& binding,
                uint8_t selector) {
  const uint32_t all = sig.params.size() >= 32 ? ~0u : (1u << sig.params.size()) - 1;
  Specialization spec;
  spec.binding = binding;
  spec.vector_extent = sig.vector_symbol >= 0 ? kVectorLengths[selector & 0x0f] : -1;
  spec.aligned_mask = (selector & 0x10) ? 0 : all;
  spec.contiguous_mask = (selector & 0x20) ? 0 : all;
  const char* stage = "lower_specialized";
  try {
    ir::Kernel k = lower_specialized(fe, sig.name, spec);
    stage = "ir::verify";
    ir::verify(k);
    stage = "generate";
    GeneratedKernel g = generate(k, spec, target_for(selector), ScheduleHint{});
    if (g.source.find(g.plan.symbol) == std::string::npos) {
      finding(stage, sig.name, "the source does not define " + g.plan.symbol);
    }
  } catch (const SourceError& e) {
    // The GPU code generator may reject a checked kernel it cannot schedule (a scan in both
    // directions) with a positioned diagnostic: a documented outcome, not a finding.
    if (std::string(stage) != "generate" || *e.what() == '\0') finding(stage, sig.name, e.what());
  } catch (const CompileError& e) {
    // A feature the GPU code generator does not support yet (dsl/SPEC.md section 11.3).
    if (std::string(stage) != "generate" || *e.what() == '\0') finding(stage, sig.name, e.what());
  } catch (const std::exception& e) {
    // The checker accepted every binding of this kernel, so no other stage may reject it.
    finding(stage, sig.name, e.what());
  }
}

}  // namespace

void run_front_end_input(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const uint8_t selector = data[0];
  const uint8_t which = data[1];
  std::string source(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::optional<Module> m;
  try {
    m = Module::from_source(source, "fuzz.kdsl");
  } catch (const SourceError& e) {
    if (std::string(e.what()).empty())
      finding("from_source", "", "a SourceError without a message");
    return;
  } catch (const ArgumentError&) {
    return;  // a kernel beyond the runtime's limits (parameters, symbols, generics)
  } catch (const std::exception& e) {
    finding("from_source", "", e.what());
  }
  const FrontEnd& fe = m->impl().front_end();
  for (const KernelSignature& sig : fe.kernels) {
    std::vector<std::vector<DType>> bindings = bindings_of(sig);
    if (selector & 0x80) {
      for (const auto& b : bindings) run_kernel(fe, sig, b, selector);
    } else {
      run_kernel(fe, sig, bindings[which % bindings.size()], selector);
    }
  }
}

}  // namespace kdsl::fuzz
