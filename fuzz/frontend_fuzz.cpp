// libFuzzer target over kdsl's front end (layout, parse, check, lower, specialize, schedule, CUDA
// code generation; no NVRTC, no GPU). Build with -DKDSL_FUZZ=ON (clang); docs/reliability.md says
// how to run it. Byte 0 of an input picks the specialization, the rest is the .kdsl source
// (fuzz/front_end_input.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/front_end_input.h"
#include "src/log.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kdsl::log().set_level(spdlog::level::off);  // no per-input log lines
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kdsl::fuzz::run_front_end_input(data, size);
  return 0;
}
