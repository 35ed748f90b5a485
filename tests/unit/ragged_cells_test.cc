#include "common/ragged_cells.h"

#include <random>
#include <string>
#include <vector>

#include "common/leaf_kind.h"
#include "common/leaf_kind_check.h"
#include "gtest/gtest.h"

namespace tdstore {
namespace {

TEST(RaggedCellsTest, ExactBytesOfACell) {
  const std::string data("\x01\x00\x02\x00\x03\x00", 6);  // three int16s
  auto cell = EncodeRaggedCell(DType::kInt16, {1, 3}, data);
  ASSERT_TRUE(cell.ok()) << cell.status();
  const std::string want = std::string("\x02\0\0\0\0\0\0\0", 8) +
                           std::string("\x01\0\0\0\0\0\0\0", 8) +
                           std::string("\x03\0\0\0\0\0\0\0", 8) + data;
  EXPECT_EQ(*cell, want);
}

TEST(RaggedCellsTest, RandomShapesRoundTripByteExact) {
  std::mt19937_64 rng(5);
  const DType dtypes[] = {DType::kFloat32, DType::kInt64, DType::kUInt8, DType::kBool,
                          DType::kComplex128, DType::kFloat16};
  for (int trial = 0; trial < 500; ++trial) {
    const DType dtype = dtypes[rng() % 6];
    std::vector<int64_t> shape(rng() % 5);  // 0-d cells too
    for (int64_t& d : shape) d = static_cast<int64_t>(rng() % 5);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::string data(static_cast<size_t>(n * DTypeSize(dtype)), '\0');
    for (char& c : data) c = static_cast<char>(rng() % 256);
    auto cell = EncodeRaggedCell(dtype, shape, data);
    ASSERT_TRUE(cell.ok()) << cell.status();
    auto back = DecodeRaggedCell(dtype, *cell);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->shape, shape);
    EXPECT_EQ(back->data, data);
  }
}

TEST(RaggedCellsTest, TheEmptyValueIsTheEmptyCell) {
  auto cell = DecodeRaggedCell(DType::kFloat32, "");
  ASSERT_TRUE(cell.ok());
  EXPECT_EQ(cell->shape, std::vector<int64_t>{0});
  EXPECT_TRUE(cell->data.empty());
}

TEST(RaggedCellsTest, WrongInputIsRefusedAndForeignBytesAreDataLoss) {
  EXPECT_EQ(EncodeRaggedCell(DType::kFloat32, {2}, "1234").status().code(),
            absl::StatusCode::kInvalidArgument);  // 4 bytes, not 8
  EXPECT_EQ(EncodeRaggedCell(DType::kFloat32, {-1}, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      EncodeRaggedCell(DType::kUInt8, std::vector<int64_t>(kMaxRaggedDims + 1, 1), "x").status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  const std::string good = *EncodeRaggedCell(DType::kFloat32, {2}, "12345678");
  std::vector<std::string> bad = {
      good.substr(0, 5),                    // no whole prefix
      good.substr(0, 12),                   // dims cut short
      good.substr(0, good.size() - 1),      // data cut short
      good + "x",                           // data too long
  };
  std::string reserved = good;
  reserved[3] = 1;
  bad.push_back(reserved);
  std::string many = good;
  many[0] = static_cast<char>(kMaxRaggedDims + 1);
  bad.push_back(many);
  std::string negative = good;
  negative[15] = static_cast<char>(0x80);  // dim 0's top byte: negative
  bad.push_back(negative);
  for (const std::string& b : bad) {
    EXPECT_EQ(DecodeRaggedCell(DType::kFloat32, b).status().code(), absl::StatusCode::kDataLoss)
        << b.size();
  }
}

TEST(RaggedCellsTest, TheLeafForm) {
  EXPECT_TRUE(CheckLeafKind(LeafKind::kRagged, DType::kUInt8, {3, 16}, 1, "float32").ok());
  EXPECT_TRUE(CheckLeafKind(LeafKind::kRagged, DType::kUInt8, {3, 2, 4}, 2, "int64").ok());
  // No dtype, an unknown one, no one-value form, no batch dims, not uint8.
  EXPECT_FALSE(CheckLeafKind(LeafKind::kRagged, DType::kUInt8, {3, 16}, 1, "").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kRagged, DType::kUInt8, {3, 16}, 1, "pickle").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kRagged, DType::kUInt8, {3, 0}, 1, "float32").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kRagged, DType::kUInt8, {16}, 0, "float32").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kRagged, DType::kFloat32, {3, 16}, 1, "float32").ok());
  EXPECT_EQ(LeafKindFromName("ragged"), LeafKind::kRagged);
}

}  // namespace
}  // namespace tdstore
