// A number from the command line as one element of a dtype, for `tdstore
// fill`: the bytes torch's fill_ would store, little-endian. The CLI links
// no torch, so the float16/bfloat16 rounding (to nearest, ties to even) is
// done here.
#ifndef TDSTORE_CLIENT_CLI_SCALAR_BYTES_H_
#define TDSTORE_CLIENT_CLI_SCALAR_BYTES_H_

#include <string>

#include "common/dtype.h"

namespace tdstore::cli {

// `text`: a decimal or floating-point number ("3", "-2.5", "1e-3", "nan",
// "inf"), or true/false. Integers take a float's value truncated toward
// zero, as a cast does. CliError for text that is no number, or a finite
// value out of the dtype's range (as torch's fill_ refuses it).
std::string ScalarBytes(const std::string& text, DType dtype);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_SCALAR_BYTES_H_
