#include "common/shape.h"

#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace tdstore {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeTest, ToString) {
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(ShapeToString({7}), "[7]");
  EXPECT_EQ(ShapeToString({100, 4}), "[100, 4]");
  EXPECT_EQ(ShapeToString({0, 1, 2}), "[0, 1, 2]");
}

TEST(ShapeTest, ValidateAcceptsValidShapes) {
  EXPECT_TRUE(ValidateShape({}, "x").ok());
  EXPECT_TRUE(ValidateShape({0}, "x").ok());
  EXPECT_TRUE(ValidateShape({3, 0, 5}, "x").ok());
  EXPECT_TRUE(ValidateShape({kMax}, "x").ok());
  EXPECT_TRUE(ValidateShape(Shape(kMaxRank, 1), "x").ok());
}

TEST(ShapeTest, ValidateRejectsNegativeDims) {
  const absl::Status s = ValidateShape({3, -1, 5}, "leaf shape");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("leaf shape"), absl::string_view::npos) << s;
  EXPECT_EQ(ValidateShape({-1}, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateShape({std::numeric_limits<int64_t>::min()}, "x").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShapeTest, ValidateRejectsTooManyDims) {
  const absl::Status s = ValidateShape(Shape(kMaxRank + 1, 1), "batch shape");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("batch shape"), absl::string_view::npos) << s;
}

TEST(ShapeTest, ByteSize) {
  EXPECT_EQ(*ByteSize({}, 4), 4);  // 0-d: one element
  EXPECT_EQ(*ByteSize({}, 1), 1);
  EXPECT_EQ(*ByteSize({3, 4}, 4), 48);
  EXPECT_EQ(*ByteSize({3, 0, 4}, 8), 0);
  EXPECT_EQ(*ByteSize({0}, 16), 0);
  EXPECT_EQ(*ByteSize({1, 1, 1, 1}, 2), 2);
  EXPECT_EQ(*ByteSize({kMax}, 1), kMax);
  EXPECT_EQ(*ByteSize({int64_t{1} << 31, int64_t{1} << 31}, 1), int64_t{1} << 62);
  EXPECT_EQ(*ByteSize(Shape(kMaxRank, 1), 16), 16);
}

TEST(ShapeTest, ByteSizeOverflowIsInvalidArgument) {
  EXPECT_EQ(ByteSize({kMax}, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ByteSize({int64_t{1} << 31, int64_t{1} << 31}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ByteSize({int64_t{1} << 32, int64_t{1} << 32}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Overflow that would wrap back to a small positive number must be caught.
  EXPECT_EQ(ByteSize({int64_t{1} << 32, (int64_t{1} << 32) + 1}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ByteSize(Shape(64, 2), 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ByteSize(Shape(62, 2), 1), int64_t{1} << 62);
}

TEST(ShapeTest, ByteSizeWithAZeroDimIsZeroEvenIfOtherDimsAreHuge) {
  EXPECT_EQ(*ByteSize({kMax, kMax, 0}, 16), 0);
  EXPECT_EQ(*ByteSize({0, kMax, kMax}, 16), 0);
}

TEST(ShapeTest, ByteSizeRejectsNegativeInputs) {
  EXPECT_FALSE(ByteSize({2, -3}, 4).ok());
  EXPECT_FALSE(ByteSize({2, 3}, -4).ok());
}

TEST(ShapeTest, ByteSizeMatchesWideMultiplication) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 5000; ++trial) {
    Shape shape(rng() % 6);
    for (int64_t& dim : shape) dim = static_cast<int64_t>(rng() % (uint64_t{1} << (rng() % 40)));
    const int64_t elem = 1 + static_cast<int64_t>(rng() % 16);
    bool zero = false;
    for (int64_t dim : shape) zero |= dim == 0;
    unsigned __int128 wide = static_cast<unsigned __int128>(elem);
    bool overflow = false;
    for (int64_t dim : shape) {
      wide *= static_cast<unsigned __int128>(dim);
      if (wide > static_cast<unsigned __int128>(kMax)) {
        overflow = true;
        break;
      }
    }
    const absl::StatusOr<int64_t> got = ByteSize(shape, elem);
    if (zero) {
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(*got, 0);
    } else if (overflow) {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
          << ShapeToString(shape) << " x " << elem;
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(static_cast<unsigned __int128>(*got), wide);
    }
  }
}

TEST(ShapeTest, HasPrefix) {
  EXPECT_TRUE(HasPrefix({}, {}));
  EXPECT_TRUE(HasPrefix({3, 4}, {}));
  EXPECT_TRUE(HasPrefix({3, 4}, {3}));
  EXPECT_TRUE(HasPrefix({3, 4}, {3, 4}));
  EXPECT_FALSE(HasPrefix({3, 4}, {4}));
  EXPECT_FALSE(HasPrefix({3, 4}, {3, 4, 5}));
  EXPECT_FALSE(HasPrefix({}, {1}));
}

TEST(ShapeTest, CsvExamples) {
  EXPECT_EQ(ShapeToCsv({100, 4}), "100,4");
  EXPECT_EQ(ShapeToCsv({}), "");
  EXPECT_EQ(ShapeToCsv({0}), "0");
  EXPECT_EQ(*ShapeFromCsv("100,4"), (Shape{100, 4}));
  EXPECT_EQ(*ShapeFromCsv(""), Shape{});
  EXPECT_EQ(*ShapeFromCsv("0"), Shape{0});
  EXPECT_EQ(*ShapeFromCsv("9223372036854775807"), Shape{kMax});
}

TEST(ShapeTest, CsvRoundTrip) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    Shape shape(rng() % (kMaxRank + 1));
    for (int64_t& dim : shape) {
      dim = trial % 3 == 0 ? static_cast<int64_t>(rng() >> 1) : static_cast<int64_t>(rng() % 5);
    }
    const std::string csv = ShapeToCsv(shape);
    const absl::StatusOr<Shape> back = ShapeFromCsv(csv);
    ASSERT_TRUE(back.ok()) << csv << ": " << back.status();
    EXPECT_EQ(*back, shape) << csv;
  }
}

TEST(ShapeTest, MalformedCsvRejected) {
  for (const char* csv :
       {",", "1,", ",1", "1,,2", " 1", "1 ", "1, 2", "-1", "1,-2", "+1", "a", "1a", "0x10",
        "1.5", "9223372036854775808", "99999999999999999999", "1;2", "[1,2]"}) {
    EXPECT_EQ(ShapeFromCsv(csv).status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << csv << "'";
  }
  // Too many dims.
  std::string csv = "1";
  for (int i = 0; i < kMaxRank; ++i) csv += ",1";
  EXPECT_EQ(ShapeFromCsv(csv).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ShapeFromCsv(std::string_view("1\0", 2)).ok());
}

}  // namespace
}  // namespace tdstore
