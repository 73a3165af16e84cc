// The CUDA toolkit's disassembler, for `kdsl emit --sass`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kdsl::cli {

/// A disassembler executable and the arguments that print a cubin's SASS (the cubin path is
/// appended).
struct Disassembler {
  std::string path;               // e.g. /usr/local/cuda/bin/cuobjdump
  std::vector<std::string> args;  // e.g. {"-c", "-g"}
};

/// nvdisasm (-c -g: code with the generated source's line numbers) or else cuobjdump (-sass), from
/// the first of $CUDA_HOME/bin, $CUDA_PATH/bin, the PATH directories and /usr/local/cuda/bin that
/// has one; nullopt when there is none.
std::optional<Disassembler> find_disassembler();

/// The one-line explanation when find_disassembler() finds nothing.
std::string no_disassembler_message();

/// Writes `cubin` to a temporary file, runs the disassembler on it (its output goes to this
/// process's stdout and stderr) and removes the file. Returns 0, or throws kdsl::Error when the
/// disassembler cannot be run or fails.
int disassemble(const Disassembler& d, const std::string& cubin, const std::string& symbol);

}  // namespace kdsl::cli
