// NumPy .npy files (format version 1.0-3.0, little-endian, C order) for `kdsl run --in/--out`.
#pragma once

#include <string>

#include "host_tensor.h"

namespace kdsl {

/// Reads a .npy file. Accepted descriptors: <f2 (f16), <f4, <f8, <i4, <i8, |b1 (bool), <c8 (c64),
/// and for bf16 the raw 16-bit patterns as <u2, <i2 or <V2 (what ml_dtypes' bfloat16 writes);
/// `want` says which dtype a 2-byte integer/void descriptor means (bf16 when the parameter is
/// bf16, f16 never: f16 must be <f2). Fortran order and big-endian data are rejected. The header
/// is read as NumPy reads it, a Python dict literal with exactly the keys descr, fortran_order and
/// shape (trailing commas allowed); anything else, or a key given twice, is a malformed header.
/// Throws kdsl::Error naming the file and the problem.
HostTensor read_npy(const std::string& path, DType want);

/// Writes `t` as a .npy file (bf16 as <u2 raw patterns; load in NumPy with
/// `np.load(p).view(ml_dtypes.bfloat16)` or in PyTorch with `.view(torch.bfloat16)` on int16).
/// Throws kdsl::Error when the file cannot be written.
void write_npy(const std::string& path, const HostTensor& t);

/// Why write_npy(path, ...) would fail to create its file, or "" when it should not: before a run,
/// so that a file that cannot be written is found before the work. For a new or regular file,
/// which write_npy writes to a temporary file beside it and renames into place, that temporary
/// file is created and removed again ("cannot create the temporary file /proc/.kdsl-npy.12.0.tmp
/// ...: No such file or directory"); a regular file kdsl may not write is refused. Devices, pipes
/// and symbolic links, written in place, are not opened here.
std::string npy_write_problem(const std::string& path);

}  // namespace kdsl
