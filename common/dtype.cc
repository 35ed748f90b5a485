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
    {DType::kUInt16, "uint16", 2},      {DType::kUInt32, "uint32", 4},
    {DType::kUInt64, "uint64", 8},      {DType::kFloat8E4M3Fn, "float8_e4m3fn", 1},
    {DType::kFloat8E5M2, "float8_e5m2", 1}, {DType::kFloat8E4M3FnUz, "float8_e4m3fnuz", 1},
    {DType::kFloat8E5M2FnUz, "float8_e5m2fnuz", 1}, {DType::kFloat8E8M0FnU, "float8_e8m0fnu", 1},
    {DType::kComplex32, "complex32", 4}, {DType::kFloat4E2M1FnX2, "float4_e2m1fn_x2", 1},
};

std::string JoinNames() {
  std::string names;
  for (const DTypeInfo& info : kDTypes) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

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

std::string_view KnownDTypeNames() {
  static const std::string* const names = new std::string(JoinNames());
  return *names;
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace tdstore
