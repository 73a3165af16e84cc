// Helpers for GPU tests: skip (saying why) without a CUDA driver or device; run a stdlib kernel
// on the GPU and compare it with the reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "src/driver.h"
#include "src/harness.h"
#include "src/verify.h"

namespace kdsl::testing {

/// Skips the current test unless a CUDA driver and device are present (and makes device 0's
/// primary context current).
#define KDSL_REQUIRE_GPU()                                                                    \
  do {                                                                                        \
    std::string why_;                                                                         \
    if (!::kdsl::driver_or_null(&why_) || ::kdsl::device_count() == 0) {                      \
      GTEST_SKIP() << "skipped: no GPU (" << (why_.empty() ? "no CUDA device" : why_) << ")"; \
    }                                                                                         \
    ::kdsl::primary_context(0);                                                               \
  } while (0)

/// Loads (once per path) a module from the source tree.
inline std::shared_ptr<const FrontEnd> front_end(const std::string& relative) {
  static std::map<std::string, std::shared_ptr<const FrontEnd>> cache;
  auto& fe = cache[relative];
  const char* root = std::getenv("KDSL_SOURCE_DIR");  // the tree may have moved (GPU machine)
  if (!fe)
    fe = run_front_end(
        SourceFile::read(std::string(root ? root : KDSL_SOURCE_DIR) + "/" + relative));
  return fe;
}

/// Runs `p` on the GPU (outputs poisoned first) and checks every output against the reference
/// interpreter with `kdsl run --verify`'s tolerance (output_tolerance). Returns the GPU tensors.
inline std::vector<HostTensor> expect_gpu_matches_reference(const Problem& p,
                                                            const std::string& label) {
  std::vector<HostTensor> ref = run_reference(p);
  GpuRun gpu(p);
  gpu.launch();
  std::vector<HostTensor> got = p.tensors;
  gpu.download(got);
  for (size_t t = 0; t < got.size(); ++t) {
    const ir::TensorParam& tp = p.ir.tensors[t];
    if (tp.role == ir::Role::in) continue;
    Comparison c = compare(got[t], ref[t], output_tolerance(p, t, ref[t]));
    EXPECT_TRUE(c.ok) << label << " (" << gpu.loaded().plan.symbol << ", "
                      << gpu.loaded().plan.schedule << ") output " << tp.name << ": "
                      << c.mismatches << " of " << c.checked << " values off; worst "
                      << describe_worst(got[t], c);
  }
  return got;
}

}  // namespace kdsl::testing
