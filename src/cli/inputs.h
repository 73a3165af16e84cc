// The data of `kdsl run` and `kdsl bench`: input sources (.npy files, constants, seeded random
// values), scalar arguments, output files and summaries.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "src/harness.h"

namespace kdsl::cli {

/// What the input options of `kdsl run` say.
struct DataOptions {
  std::vector<std::string> in;    // NAME=PATH.npy or NAME=const:VALUE
  std::vector<std::string> args;  // NAME=NUMBER
  bool convert = false;           // round .npy data of another dtype to the parameter's
  uint64_t seed = 0;
};

/// Builds the problem: the binding and shape from the kernel options, shape symbols missing from
/// --shape taken from the .npy files, inputs from files, constants or fill_random. `report` gets
/// one entry per input saying where it came from. Throws UsageError / ArgumentError / Error with
/// one-line messages for every mismatch.
Problem build_problem(const KernelOptions& k, const DataOptions& d, nlohmann::json& report);

/// Checks --out NAME=PATH against the kernel's outputs (before anything runs): UsageError for a
/// NAME given twice, for two PATHs of one file, and for a PATH that is the file of an `in`
/// (--in NAME=FILE.npy) other than NAME's own (an InOut tensor may update its file in place);
/// Error for a PATH that is a directory or in a directory that cannot be written. Returns (IR
/// tensor index, path) pairs.
std::vector<std::pair<int, std::string>> resolve_outputs(const Problem& p,
                                                         const std::vector<std::string>& out,
                                                         const std::vector<std::string>& in);

/// Summary of a tensor's values: dtype, shape, min, max, mean over the finite values, NaN and
/// infinity counts.
nlohmann::json summarize(const HostTensor& t);

/// "y: bf16 (2, 4): min -1.5, max 2, mean 0.125" from summarize().
std::string summary_line(const std::string& name, const nlohmann::json& s);

/// Throws ArgumentError when the kernel's tensors with this binding and shape would take more
/// than half of this machine's memory (or their size overflows).
void check_sizes(const KernelSignature& sig, const std::vector<DType>& binding,
                 const std::map<std::string, int64_t>& shape);

/// "(2, 4)", "(8,)".
std::string shape_text(const std::vector<int64_t>& s);

}  // namespace kdsl::cli
