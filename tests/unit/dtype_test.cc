#include "common/dtype.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace tdstore {
namespace {

constexpr DType kAllKnown[] = {
    DType::kBool,     DType::kUInt8,    DType::kInt8,      DType::kInt16,
    DType::kInt32,    DType::kInt64,    DType::kFloat16,   DType::kBFloat16,
    DType::kFloat32,  DType::kFloat64,  DType::kComplex64, DType::kComplex128,
    DType::kUInt16,   DType::kUInt32,   DType::kUInt64,    DType::kFloat8E4M3Fn,
    DType::kFloat8E5M2, DType::kFloat8E4M3FnUz, DType::kFloat8E5M2FnUz, DType::kFloat8E8M0FnU,
    DType::kComplex32, DType::kFloat4E2M1FnX2,
};

TEST(DTypeTest, EveryNameRoundTrips) {
  std::set<std::string_view> names;
  for (DType dtype : kAllKnown) {
    const std::string_view name = DTypeName(dtype);
    ASSERT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    const std::optional<DType> back = DTypeFromName(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, dtype) << name;
  }
}

TEST(DTypeTest, NamesAreTheDocumentedOnes) {
  EXPECT_EQ(DTypeName(DType::kBool), "bool");
  EXPECT_EQ(DTypeName(DType::kUInt8), "uint8");
  EXPECT_EQ(DTypeName(DType::kInt8), "int8");
  EXPECT_EQ(DTypeName(DType::kInt16), "int16");
  EXPECT_EQ(DTypeName(DType::kInt32), "int32");
  EXPECT_EQ(DTypeName(DType::kInt64), "int64");
  EXPECT_EQ(DTypeName(DType::kFloat16), "float16");
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(DTypeName(DType::kFloat32), "float32");
  EXPECT_EQ(DTypeName(DType::kFloat64), "float64");
  EXPECT_EQ(DTypeName(DType::kComplex64), "complex64");
  EXPECT_EQ(DTypeName(DType::kComplex128), "complex128");
  // torch's names, as Python's str(dtype) minus "torch.".
  EXPECT_EQ(DTypeName(DType::kUInt16), "uint16");
  EXPECT_EQ(DTypeName(DType::kUInt32), "uint32");
  EXPECT_EQ(DTypeName(DType::kUInt64), "uint64");
  EXPECT_EQ(DTypeName(DType::kFloat8E4M3Fn), "float8_e4m3fn");
  EXPECT_EQ(DTypeName(DType::kFloat8E5M2), "float8_e5m2");
  EXPECT_EQ(DTypeName(DType::kFloat8E4M3FnUz), "float8_e4m3fnuz");
  EXPECT_EQ(DTypeName(DType::kFloat8E5M2FnUz), "float8_e5m2fnuz");
  EXPECT_EQ(DTypeName(DType::kFloat8E8M0FnU), "float8_e8m0fnu");
  EXPECT_EQ(DTypeName(DType::kComplex32), "complex32");
  EXPECT_EQ(DTypeName(DType::kFloat4E2M1FnX2), "float4_e2m1fn_x2");
}

TEST(DTypeTest, KnownNamesListsEveryDTypeOnce) {
  const std::string_view names = KnownDTypeNames();
  for (DType dtype : kAllKnown) {
    const std::string needle = std::string(DTypeName(dtype)) + ",";
    EXPECT_NE((std::string(names) + ",").find(needle), std::string::npos) << needle;
  }
  EXPECT_EQ(std::count(names.begin(), names.end(), ','), std::size(kAllKnown) - 1);
}

TEST(DTypeTest, Sizes) {
  EXPECT_EQ(DTypeSize(DType::kBool), 1);
  EXPECT_EQ(DTypeSize(DType::kUInt8), 1);
  EXPECT_EQ(DTypeSize(DType::kInt8), 1);
  EXPECT_EQ(DTypeSize(DType::kInt16), 2);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2);
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8);
  EXPECT_EQ(DTypeSize(DType::kComplex64), 8);
  EXPECT_EQ(DTypeSize(DType::kComplex128), 16);
  EXPECT_EQ(DTypeSize(DType::kUInt16), 2);
  EXPECT_EQ(DTypeSize(DType::kUInt32), 4);
  EXPECT_EQ(DTypeSize(DType::kUInt64), 8);
  for (DType f8 : {DType::kFloat8E4M3Fn, DType::kFloat8E5M2, DType::kFloat8E4M3FnUz,
                   DType::kFloat8E5M2FnUz, DType::kFloat8E8M0FnU}) {
    EXPECT_EQ(DTypeSize(f8), 1) << DTypeName(f8);
  }
  EXPECT_EQ(DTypeSize(DType::kComplex32), 4);
  EXPECT_EQ(DTypeSize(DType::kFloat4E2M1FnX2), 1);  // two packed values per element
  EXPECT_EQ(DTypeSize(DType::kUnspecified), 0);
}

TEST(DTypeTest, KnownNumbersAreExactlyOneToTwentyTwo) {
  for (DType dtype : kAllKnown) EXPECT_TRUE(IsKnownDType(static_cast<int>(dtype)));
  EXPECT_FALSE(IsKnownDType(0));
  EXPECT_FALSE(IsKnownDType(23));
  EXPECT_FALSE(IsKnownDType(-1));
  EXPECT_FALSE(IsKnownDType(1000));
  int known = 0;
  for (int n = -100; n <= 100; ++n) known += IsKnownDType(n) ? 1 : 0;
  EXPECT_EQ(known, 22);
}

TEST(DTypeTest, UnknownNamesRejected) {
  for (const char* name : {"", "float", "Float32", "FLOAT32", "float32 ", " float32", "f4",
                           "int", "double", "half", "unspecified", "complex16", "bool8",
                           "float8", "float8_e4m3", "uint128", "bits8", "torch.uint16"}) {
    EXPECT_FALSE(DTypeFromName(name).has_value()) << "'" << name << "'";
  }
  // A name with an embedded NUL must not match its prefix.
  EXPECT_FALSE(DTypeFromName(std::string_view("int8\0x", 6)).has_value());
}

TEST(DTypeTest, UnspecifiedHasANameThatDoesNotParse) {
  const std::string_view name = DTypeName(DType::kUnspecified);
  EXPECT_FALSE(name.empty());
  EXPECT_FALSE(DTypeFromName(name).has_value());
  EXPECT_FALSE(DTypeName(static_cast<DType>(99)).empty());
}

}  // namespace
}  // namespace tdstore
