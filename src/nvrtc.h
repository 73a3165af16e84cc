// NVRTC: self-contained CUDA C++ source to a cubin for one exact GPU architecture. Needs no GPU and
// no driver (NVRTC is linked; libnvrtc ships with the toolkit and the wheels).
#pragma once

#include <string>
#include <vector>

namespace kdsl {

/// The result of one successful compilation.
struct Cubin {
  std::string data;         ///< The cubin (an ELF image), ready for cuModuleLoadData.
  std::string log;          ///< NVRTC's log (warnings); empty when there were none.
  double compile_ms = 0.0;  ///< Wall time of nvrtcCompileProgram, milliseconds.
};

/// The full option list nvrtc_compile passes to NVRTC for `arch` and the caller's `extra` options:
/// "--gpu-architecture=<arch>", "-std=c++20", then `extra` in order. Cache keys hash this list, so
/// a change to the defaults changes every key.
std::vector<std::string> nvrtc_options(const std::string& arch,
                                       const std::vector<std::string>& extra);

/// Compiles `source` (self-contained: no #include of toolkit headers, no -I paths) straight to a
/// cubin for `arch` ("sm_90", "sm_90a", "sm_100f", ...). `program_name` names the program in the
/// log and in errors (use the kernel symbol). Thread-safe: each call owns its NVRTC program.
/// Throws CompileError when `arch` is not supported by this NVRTC or the source does not compile;
/// the message holds the program name, the architecture, the options, the full NVRTC log and the
/// source lines around the first error. The message is deterministic: the same failure gives the
/// same text every time.
Cubin nvrtc_compile(const std::string& source, const std::string& program_name,
                    const std::string& arch, const std::vector<std::string>& options);

/// Compiles `source` like nvrtc_compile, but to PTX for the virtual architecture matching `arch`
/// ("sm_90" -> "compute_90", suffixes kept), for reading (`kdsl emit --ptx`). Returns the PTX text
/// (without its trailing NUL). Throws CompileError as nvrtc_compile does.
std::string nvrtc_compile_ptx(const std::string& source, const std::string& program_name,
                              const std::string& arch, const std::vector<std::string>& options);

/// The NVRTC version as "major.minor", e.g. "13.0".
std::string nvrtc_version();

/// Every architecture this NVRTC compiles for, as "sm_NN", ascending (e.g. "sm_75" ... "sm_121").
const std::vector<std::string>& nvrtc_supported_archs();

/// Whether `arch` names an architecture this NVRTC compiles for: "sm_NN" with NN supported,
/// optionally suffixed "a" (architecture-specific, sm_90 and later) or "f" (family, sm_100 and
/// later).
bool nvrtc_supports_arch(const std::string& arch);

}  // namespace kdsl
