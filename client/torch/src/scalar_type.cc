#include "client/torch/src/scalar_type.h"

namespace tdstore {
namespace {

struct Pair {
  at::ScalarType torch;
  DType tdstore;
};

// The one place that knows which torch dtype is which wire dtype.
constexpr Pair kPairs[] = {
    {at::ScalarType::Bool, DType::kBool},
    {at::ScalarType::Byte, DType::kUInt8},
    {at::ScalarType::Char, DType::kInt8},
    {at::ScalarType::Short, DType::kInt16},
    {at::ScalarType::Int, DType::kInt32},
    {at::ScalarType::Long, DType::kInt64},
    {at::ScalarType::Half, DType::kFloat16},
    {at::ScalarType::BFloat16, DType::kBFloat16},
    {at::ScalarType::Float, DType::kFloat32},
    {at::ScalarType::Double, DType::kFloat64},
    {at::ScalarType::ComplexFloat, DType::kComplex64},
    {at::ScalarType::ComplexDouble, DType::kComplex128},
    {at::ScalarType::ComplexHalf, DType::kComplex32},
    // The libtorch this client builds against (Debian's 1.13) has no unsigned
    // types past uint8 and no float8/float4: those leaves are refused here
    // with the dtype's name (tensor_bytes.cc) and read through the core.
};

}  // namespace

std::optional<DType> DTypeFromScalarType(at::ScalarType type) {
  for (const Pair& p : kPairs) {
    if (p.torch == type) return p.tdstore;
  }
  return std::nullopt;
}

std::optional<at::ScalarType> ScalarTypeFromDType(DType dtype) {
  for (const Pair& p : kPairs) {
    if (p.tdstore == dtype) return p.torch;
  }
  return std::nullopt;
}

}  // namespace tdstore
