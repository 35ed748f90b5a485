#include "common/dtype.h"

namespace tdstore {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int64_t size;
};

// One row per known dtype. The names are stored in Redis records, so they
// must never change.
constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "bool", 1},          {DType::kUInt8, "uint8", 1},
    {DType::kInt8, "int8", 1},          {DType::kInt16, "int16", 2},
    {DType::kInt32, "int32", 4},        {DType::kInt64, "int64", 8},
    {DType::kFloat16, "float16", 2},    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat32, "float32", 4},    {DType::kFloat64, "float64", 8},
    {DType::kComplex64, "complex64", 8}, {DType::kComplex128, "complex128", 16},
};

const DTypeInfo* Find(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}

}  // namespace

bool IsKnownDType(int number) {
  for (const DTypeInfo& info : kDTypes) {
    if (static_cast<int>(info.dtype) == number) return true;
  }
  return false;
}

int64_t DTypeSize(DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info == nullptr ? 0 : info->size;
}

std::string_view DTypeName(DType dtype) {
  const DTypeInfo* info = Find(dtype);
  // "unspecified" is for messages only: DTypeFromName does not accept it, so
  // it can never be read back as a stored dtype.
  return info == nullptr ? std::string_view("unspecified") : info->name;
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace tdstore
