// The NumPy .npy header: parse and format (format versions 1.0, 2.0, 3.0).
//
// A .npy file is: magic "\x93NUMPY", major and minor version bytes, a
// little-endian header length (2 bytes in 1.0, 4 bytes in 2.0/3.0), an ASCII
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces to a multiple of 64 bytes and ending in '\n', then the
// raw data.
//
// Only what tdstore can store is accepted: little-endian (or byte-order-free)
// dtypes of common/dtype.h, C order. Fortran order, big-endian data and unknown
// dtypes are rejected with a message saying so. bfloat16 has no NumPy dtype,
// so FormatNpyHeader rejects it.
//
// The CLI's .npy and .npz files (npy_file.h, npz_file.h) read and write
// their headers here. Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_CLIENT_CLI_NPY_HEADER_H_
#define TDSTORE_CLIENT_CLI_NPY_HEADER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/shape.h"

namespace tdstore::cli {

struct NpyHeader {
  DType dtype = DType::kUnspecified;
  Shape shape;
  // Offset of the first data byte from the start of the file.
  int64_t data_offset = 0;
};

// `prefix` holds at least the first bytes of the file: the whole header, or
// INVALID_ARGUMENT("truncated ...") if it does not. The header is checked
// fully (magic, version, dict syntax, dtype, order); the data is not.
absl::StatusOr<NpyHeader> ParseNpyHeader(std::string_view prefix);

// Version 1.0 header (2.0 when the dict is longer than 65535 bytes) for a
// C-order array; its length is a multiple of 64. INVALID_ARGUMENT for
// bfloat16 and kUnspecified.
absl::StatusOr<std::string> FormatNpyHeader(DType dtype, const Shape& shape);

// NumPy's descr for a dtype ("<f4", "|b1", "<c16"...), empty if none.
std::string_view NpyDescr(DType dtype);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_NPY_HEADER_H_
