// Element types of stored tensors: names, sizes and wire numbers.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_DTYPE_H_
#define TDSTORE_COMMON_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tdstore {

// The numbers equal proto tdstore.v1.DType, so conversion is a cast after
// IsKnownDType() says the number is valid.
enum class DType : int {
  kUnspecified = 0,
  kBool = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kInt16 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kFloat16 = 7,
  kBFloat16 = 8,
  kFloat32 = 9,
  kFloat64 = 10,
  kComplex64 = 11,
  kComplex128 = 12,
  kUInt16 = 13,
  kUInt32 = 14,
  kUInt64 = 15,
  kFloat8E4M3Fn = 16,
  kFloat8E5M2 = 17,
  kFloat8E4M3FnUz = 18,
  kFloat8E5M2FnUz = 19,
  kFloat8E8M0FnU = 20,
  kComplex32 = 21,
  // Two 4-bit floats packed in one byte: one element is the byte, as torch's
  // float4_e2m1fn_x2 counts it.
  kFloat4E2M1FnX2 = 22,
};

// True for every dtype above except kUnspecified.
bool IsKnownDType(int number);

// Size of one element in bytes; 0 for kUnspecified.
int64_t DTypeSize(DType dtype);

// Lower-case name as used in docs, the CLI and Redis records: "float32",
// "bfloat16", "complex64", "bool", ... These are torch's names without the
// "torch." prefix.
std::string_view DTypeName(DType dtype);

// Every known name, comma-separated in wire-number order: for error messages
// that list what can be stored.
std::string_view KnownDTypeNames();

// Inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> DTypeFromName(std::string_view name);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_DTYPE_H_
