#include "common/value_rows.h"

#include <random>
#include <string>
#include <vector>

#include "common/leaf_kind.h"
#include "common/leaf_kind_check.h"
#include "gtest/gtest.h"

namespace tdstore {
namespace {

TEST(ValueRowsTest, SlotsArePowersOfTwoThatHoldTheLengthToo) {
  EXPECT_EQ(*ValueSlotBytes(0), 16);
  EXPECT_EQ(*ValueSlotBytes(12), 16);
  EXPECT_EQ(*ValueSlotBytes(13), 32);
  EXPECT_EQ(*ValueSlotBytes(1000), 1024);  // 1004 bytes fit 1024
  EXPECT_EQ(*ValueSlotBytes(1021), 2048);
  EXPECT_EQ(*ValueSlotBytes(kMaxValueBytes), int64_t{32} << 20);
  EXPECT_EQ(ValueSlotBytes(kMaxValueBytes + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValueSlotBytes(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValueRowsTest, RandomValuesRoundTripByteExact) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> values(rng() % 20);
    size_t longest = 0;
    for (std::string& v : values) {
      v.resize(rng() % 50);
      for (char& c : v) c = static_cast<char>(rng() % 256);  // NULs included
      longest = std::max(longest, v.size());
    }
    const int64_t slot = *ValueSlotBytes(static_cast<int64_t>(longest)) << (rng() % 2);
    std::string out(values.size() * slot, '\x55');  // garbage the encoding must cover
    ASSERT_TRUE(EncodeValueRows({values.begin(), values.end()}, slot, out.data()).ok());
    auto back = DecodeValueRows(out.data(), static_cast<int64_t>(values.size()), slot);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ((*back)[i], values[i]) << i;
    // Padding is zeros, so equal values give equal slots.
    for (size_t i = 0; i < values.size(); ++i) {
      for (int64_t b = kValueLengthBytes + values[i].size(); b < slot; ++b) {
        ASSERT_EQ(out[i * slot + b], '\0');
      }
    }
  }
}

TEST(ValueRowsTest, AllZeroSlotsAreRowsNeverWrittenAndReadApartFromAnEmptyValue) {
  std::string slots(3 * 16, '\0');
  ASSERT_TRUE(EncodeValueRows({"", "x"}, 16, slots.data() + 16).ok());  // rows 1 and 2
  std::vector<bool> written;
  auto values = DecodeValueRows(slots.data(), 3, 16, &written);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(written, (std::vector<bool>{false, true, true}));
  EXPECT_TRUE((*values)[0].empty());
  EXPECT_TRUE((*values)[1].empty());
  EXPECT_EQ((*values)[2], "x");
  // Without `written`, both read empty.
  EXPECT_TRUE(DecodeValueRows(slots.data(), 3, 16)->at(0).empty());
}

TEST(ValueRowsTest, AValueTooLongIsRefusedAndNothingWritten) {
  std::string out(2 * 16, '\x7f');
  const std::vector<std::string_view> values{"fits", "thirteen byte"};
  const absl::Status s = EncodeValueRows(values, 16, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("value 1 is 13 bytes"), std::string_view::npos) << s.message();
  EXPECT_EQ(out, std::string(2 * 16, '\x7f'));
}

TEST(ValueRowsTest, ALengthPastItsSlotIsDataLoss) {
  std::string slots(2 * 16, '\0');
  slots[16] = 13;  // row 1 claims 13 bytes in a 12-byte slot
  auto values = DecodeValueRows(slots.data(), 2, 16);
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(values.status().message().find("row 1"), std::string_view::npos);
  slots[16] = 12;
  EXPECT_TRUE(DecodeValueRows(slots.data(), 2, 16).ok());
}

TEST(LeafKindTest, NamesRoundTripAndTheShapeRules) {
  for (LeafKind kind : {LeafKind::kTensor, LeafKind::kText, LeafKind::kJson, LeafKind::kBytes,
                        LeafKind::kRagged}) {
    EXPECT_EQ(LeafKindFromName(LeafKindName(kind)), kind);
    EXPECT_TRUE(IsKnownLeafKind(static_cast<int>(kind)));
  }
  EXPECT_FALSE(LeafKindFromName("pickle").has_value());
  EXPECT_FALSE(IsKnownLeafKind(5));
  // A tensor: anything, no value.
  EXPECT_TRUE(CheckLeafKind(LeafKind::kTensor, DType::kFloat32, {3, 2, 2}, 1, "").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kTensor, DType::kFloat32, {3}, 1, "v").ok());
  // Values: uint8, one slot dim of 0 or >= 4 past the batch dims.
  EXPECT_TRUE(CheckLeafKind(LeafKind::kText, DType::kUInt8, {3, 16}, 1, "").ok());
  EXPECT_TRUE(CheckLeafKind(LeafKind::kText, DType::kUInt8, {3, 4}, 1, "").ok());
  EXPECT_TRUE(CheckLeafKind(LeafKind::kJson, DType::kUInt8, {3, 0}, 1, "{}").ok());
  EXPECT_TRUE(CheckLeafKind(LeafKind::kJson, DType::kUInt8, {0}, 0, "1").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kText, DType::kInt8, {3, 16}, 1, "").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kText, DType::kUInt8, {3, 3}, 1, "").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kText, DType::kUInt8, {3, 2, 16}, 1, "").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kText, DType::kUInt8, {3}, 1, "").ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kText, DType::kUInt8, {3, 16}, 1, "v").ok());
  EXPECT_TRUE(CheckLeafKind(LeafKind::kBytes, DType::kUInt8, {3, 0}, 1,
                            std::string(kMaxOneValueBytes, 'x'))
                  .ok());
  EXPECT_FALSE(CheckLeafKind(LeafKind::kBytes, DType::kUInt8, {3, 0}, 1,
                             std::string(kMaxOneValueBytes + 1, 'x'))
                   .ok());
  EXPECT_FALSE(CheckLeafKind(static_cast<LeafKind>(9), DType::kUInt8, {3, 0}, 1, "").ok());
}

}  // namespace
}  // namespace tdstore
