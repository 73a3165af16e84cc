// One fuzzing input through the whole front end, without NVRTC or a GPU: the libFuzzer target
// (fuzz/frontend_fuzz.cpp) and the regression test (tests/fuzz_regressions_test.cpp) share it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kdsl::fuzz {

/// Runs one input. Bytes 0 and 1 select what to generate, the rest is a .kdsl module:
///   byte 0, bits 0-3: the vector length N, from a table of 16 (1, 7, 33, 1000, 65537, ...);
///           bit 4: no tensor 16-byte aligned; bit 5: no tensor contiguous along its vector axis;
///           bit 6: target sm_80 (A100) instead of sm_90 (H100/H200);
///           bit 7: every dtype binding of each kernel (at most kMaxBindings), else only one;
///   byte 1: which binding (modulo their number) when byte 0 has no bit 7.
/// The module is laid out, parsed and checked (Module::from_source, which checks every kernel under
/// every binding); then each kernel is lowered, specialized, scheduled and turned into CUDA C++.
void run_front_end_input(const uint8_t* data, size_t size);

/// Most dtype bindings run per kernel (the first ones in declaration order).
inline constexpr int kMaxBindings = 12;

}  // namespace kdsl::fuzz
