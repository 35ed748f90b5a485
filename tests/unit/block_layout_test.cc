#include "common/block_layout.h"

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "common/shape.h"
#include "gtest/gtest.h"

namespace tdstore {
namespace {

struct Geometry {
  Shape batch_shape;
  Shape leaf_shape;
  int64_t elem_size = 1;
  int64_t rows_per_block = 1;
  int64_t part_bytes = 1;
};

std::string Describe(const Geometry& g) {
  return "batch " + ShapeToString(g.batch_shape) + " leaf " + ShapeToString(g.leaf_shape) +
         " elem " + std::to_string(g.elem_size) + " rows_per_block " +
         std::to_string(g.rows_per_block) + " part_bytes " + std::to_string(g.part_bytes);
}

Geometry RandomGeometry(std::mt19937_64& rng) {
  Geometry g;
  // Zero dims are rare but present, so most layouts hold data.
  auto dim = [&](int64_t max) {
    return rng() % 12 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max));
  };
  g.batch_shape.resize(rng() % 4);
  for (int64_t& d : g.batch_shape) d = dim(g.batch_shape.size() == 1 ? 200 : 12);
  g.leaf_shape = g.batch_shape;
  for (size_t n = rng() % 3; n > 0; --n) g.leaf_shape.push_back(dim(6));
  g.elem_size = 1 + static_cast<int64_t>(rng() % 16);
  g.rows_per_block = 1 + static_cast<int64_t>(rng() % 50);
  g.part_bytes = 1 + static_cast<int64_t>(rng() % 1000);
  return g;
}

std::vector<Segment> Collect(const BlockLayout& layout, int64_t offset, int64_t length,
                             int64_t max_piece) {
  std::vector<Segment> out;
  layout.ForEachSegment(offset, length, max_piece,
                        [&](const Segment& s) { out.push_back(s); });
  return out;
}

// Checks the block and part sizes of one layout against its geometry.
void CheckSizes(const Geometry& g, const BlockLayout& layout) {
  SCOPED_TRACE(Describe(g));
  const int64_t total = *ByteSize(g.leaf_shape, g.elem_size);
  ASSERT_EQ(layout.total_bytes(), total);
  ASSERT_EQ(layout.part_bytes(), g.part_bytes);

  if (g.batch_shape.empty()) {
    // Modelled as one-byte rows with part-sized blocks.
    EXPECT_EQ(layout.rows(), total);
    EXPECT_EQ(layout.row_bytes(), 1);
    EXPECT_EQ(layout.rows_per_block(), g.part_bytes);
  } else {
    EXPECT_EQ(layout.rows(), g.batch_shape[0]);
    EXPECT_EQ(layout.row_bytes(),
              *ByteSize(absl::MakeConstSpan(g.leaf_shape).subspan(1), g.elem_size));
    EXPECT_EQ(layout.rows_per_block(), g.rows_per_block);
  }

  if (total == 0) {
    EXPECT_EQ(layout.block_count(), 0);
    return;
  }
  const int64_t rpb = layout.rows_per_block();
  EXPECT_EQ(layout.block_count(), (layout.rows() + rpb - 1) / rpb);

  int64_t sum = 0;
  for (int64_t b = 0; b < layout.block_count(); ++b) {
    EXPECT_EQ(layout.block_offset(b), sum) << "block " << b;
    const int64_t bytes = layout.block_bytes(b);
    const int64_t rows_in_block = std::min(rpb, layout.rows() - b * rpb);
    EXPECT_EQ(bytes, rows_in_block * layout.row_bytes()) << "block " << b;
    EXPECT_GT(bytes, 0);
    sum += bytes;

    EXPECT_EQ(layout.part_count(b), (bytes + g.part_bytes - 1) / g.part_bytes);
    int64_t part_sum = 0;
    for (int64_t p = 0; p < layout.part_count(b); ++p) {
      const int64_t size = layout.part_size(b, p);
      EXPECT_GT(size, 0);
      EXPECT_LE(size, g.part_bytes);
      if (p + 1 < layout.part_count(b)) {
        EXPECT_EQ(size, g.part_bytes);
      }
      part_sum += size;
    }
    EXPECT_EQ(part_sum, bytes) << "block " << b;

    if (g.batch_shape.empty()) {
      EXPECT_EQ(layout.part_count(b), 1) << "block " << b;
      EXPECT_LE(layout.part_size(b, 0), g.part_bytes);
    }
  }
  EXPECT_EQ(sum, total);
  if (g.batch_shape.empty()) {
    EXPECT_EQ(layout.block_count(), (total + g.part_bytes - 1) / g.part_bytes);
  }
}

// Checks one ForEachSegment call: exact cover, order, part bounds, piece
// limit, and that pieces are cut only where they must be.
void CheckSegments(const BlockLayout& layout, int64_t offset, int64_t length,
                   int64_t max_piece) {
  SCOPED_TRACE("range [" + std::to_string(offset) + ", +" + std::to_string(length) +
               ") max_piece " + std::to_string(max_piece));
  const std::vector<Segment> segments = Collect(layout, offset, length, max_piece);
  int64_t pos = offset;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    ASSERT_EQ(s.leaf_offset, pos) << "segment " << i;
    ASSERT_GE(s.length, 1);
    ASSERT_LE(s.length, max_piece);
    ASSERT_GE(s.block, 0);
    ASSERT_LT(s.block, layout.block_count());
    ASSERT_GE(s.part, 0);
    ASSERT_LT(s.part, layout.part_count(s.block));
    ASSERT_GE(s.offset_in_part, 0);
    ASSERT_LE(s.offset_in_part + s.length, layout.part_size(s.block, s.part));
    // The piece really is at that place of that part.
    ASSERT_EQ(layout.block_offset(s.block) + s.part * layout.part_bytes() + s.offset_in_part,
              s.leaf_offset);
    // Maximal pieces: a piece that is not the last stops only at max_piece
    // or at the end of its part.
    if (i + 1 < segments.size()) {
      EXPECT_TRUE(s.length == max_piece ||
                  s.offset_in_part + s.length == layout.part_size(s.block, s.part))
          << "segment " << i << " was cut early";
    }
    pos += s.length;
  }
  EXPECT_EQ(pos, offset + length);
}

TEST(BlockLayoutTest, RandomGeometries) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const Geometry g = RandomGeometry(rng);
    const absl::StatusOr<BlockLayout> layout = BlockLayout::Make(
        g.batch_shape, g.leaf_shape, g.elem_size, g.rows_per_block, g.part_bytes);
    ASSERT_TRUE(layout.ok()) << Describe(g) << ": " << layout.status();
    CheckSizes(g, *layout);

    const int64_t total = layout->total_bytes();
    SCOPED_TRACE(Describe(g));
    CheckSegments(*layout, 0, total, int64_t{1} << 40);
    for (int r = 0; r < 20; ++r) {
      const int64_t offset = static_cast<int64_t>(rng() % static_cast<uint64_t>(total + 1));
      const int64_t length =
          static_cast<int64_t>(rng() % static_cast<uint64_t>(total - offset + 1));
      const int64_t max_piece =
          r % 2 == 0 ? 1 + static_cast<int64_t>(rng() % 64)
                     : 1 + static_cast<int64_t>(rng() % 2000);
      CheckSegments(*layout, offset, length, max_piece);
    }
  }
}

TEST(BlockLayoutTest, WholeLeafVisitsEveryPartOnceInOrder) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 500; ++trial) {
    const Geometry g = RandomGeometry(rng);
    const BlockLayout layout = *BlockLayout::Make(g.batch_shape, g.leaf_shape, g.elem_size,
                                                  g.rows_per_block, g.part_bytes);
    std::vector<Segment> expected;
    int64_t offset = 0;
    for (int64_t b = 0; b < layout.block_count(); ++b) {
      for (int64_t p = 0; p < layout.part_count(b); ++p) {
        expected.push_back({b, p, 0, layout.part_size(b, p), offset});
        offset += layout.part_size(b, p);
      }
    }
    const std::vector<Segment> got =
        Collect(layout, 0, layout.total_bytes(), layout.total_bytes() + 1);
    ASSERT_EQ(got.size(), expected.size()) << Describe(g);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].block, expected[i].block);
      EXPECT_EQ(got[i].part, expected[i].part);
      EXPECT_EQ(got[i].offset_in_part, 0);
      EXPECT_EQ(got[i].length, expected[i].length);
      EXPECT_EQ(got[i].leaf_offset, expected[i].leaf_offset);
    }
  }
}

TEST(BlockLayoutTest, Example) {
  // 10 rows of 3 float32 (12 bytes); 4 rows per block (48 bytes); parts of
  // 20 bytes: blocks of 48, 48, 24 bytes; parts 20+20+8, 20+20+8, 20+4.
  const BlockLayout layout = *BlockLayout::Make({10}, {10, 3}, 4, 4, 20);
  EXPECT_EQ(layout.total_bytes(), 120);
  EXPECT_EQ(layout.block_count(), 3);
  EXPECT_EQ(layout.block_bytes(2), 24);
  EXPECT_EQ(layout.part_count(0), 3);
  EXPECT_EQ(layout.part_size(0, 2), 8);
  EXPECT_EQ(layout.part_count(2), 2);
  EXPECT_EQ(layout.part_size(2, 1), 4);

  // Bytes 44..60: the last 4 bytes of block 0 (part 2), then 12 bytes of
  // block 1 part 0.
  const std::vector<Segment> s = Collect(layout, 44, 16, 100);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].block, 0);
  EXPECT_EQ(s[0].part, 2);
  EXPECT_EQ(s[0].offset_in_part, 4);
  EXPECT_EQ(s[0].length, 4);
  EXPECT_EQ(s[1].block, 1);
  EXPECT_EQ(s[1].part, 0);
  EXPECT_EQ(s[1].offset_in_part, 0);
  EXPECT_EQ(s[1].length, 12);
  EXPECT_EQ(s[1].leaf_offset, 48);
}

// A leaf in a record of 10-byte rows, at offset 4, 3 rows per block, parts
// of 25 bytes: each row of the leaf is its own segment, a stride apart,
// and blocks and parts are cut from the record's rows.
TEST(BlockLayoutTest, LeafInARecord) {
  const BlockLayout layout = *BlockLayout::Make({7}, {7, 2}, 2, 3, 25, /*stride=*/10,
                                                /*field_offset=*/4);
  EXPECT_TRUE(layout.in_record());
  EXPECT_EQ(layout.total_bytes(), 28);
  EXPECT_EQ(layout.stored_bytes(), 70);
  EXPECT_EQ(layout.block_count(), 3);
  EXPECT_EQ(layout.block_bytes(0), 30);
  EXPECT_EQ(layout.block_bytes(2), 10);
  EXPECT_EQ(layout.part_count(0), 2);
  std::vector<Segment> got;
  layout.ForEachSegment(0, layout.total_bytes(), 1000, [&](const Segment& s) { got.push_back(s); });
  // 7 rows, and rows 2 and 5 cross a part boundary (at byte 25 of their
  // block): 9 segments.
  ASSERT_EQ(got.size(), 9u);
  EXPECT_EQ(got[0].block, 0); EXPECT_EQ(got[0].offset_in_part, 4); EXPECT_EQ(got[0].length, 4);
  EXPECT_EQ(got[1].offset_in_part, 14);
  EXPECT_EQ(got[4].block, 1); EXPECT_EQ(got[4].offset_in_part, 4); EXPECT_EQ(got[4].leaf_offset, 12);
  std::vector<Segment> split;
  layout.ForEachSegment(8, 4, 1000, [&](const Segment& s) { split.push_back(s); });
  ASSERT_EQ(split.size(), 2u);  // row 2 crosses the part boundary at byte 25
  EXPECT_EQ(split[0].part, 0); EXPECT_EQ(split[0].offset_in_part, 24); EXPECT_EQ(split[0].length, 1);
  EXPECT_EQ(split[1].part, 1); EXPECT_EQ(split[1].offset_in_part, 0); EXPECT_EQ(split[1].length, 3);
  const BlockLayout stored = layout.StoredRows();
  EXPECT_FALSE(stored.in_record());
  EXPECT_EQ(stored.total_bytes(), 70);
  EXPECT_EQ(stored.row_bytes(), 10);
  // A row that does not fit its record, or a record without batch dims.
  EXPECT_FALSE(BlockLayout::Make({7}, {7, 2}, 2, 3, 25, 10, 7).ok());
  EXPECT_FALSE(BlockLayout::Make({}, {7, 2}, 2, 3, 25, 10, 0).ok());
}

TEST(BlockLayoutTest, DictWithoutBatchDims) {
  // 1000 bytes cut into pieces of 300: piece p is part 0 of block p.
  const BlockLayout layout = *BlockLayout::Make({}, {250}, 4, 7, 300);
  EXPECT_EQ(layout.block_count(), 4);
  for (int64_t b = 0; b < 4; ++b) {
    EXPECT_EQ(layout.part_count(b), 1);
    EXPECT_EQ(layout.block_bytes(b), b < 3 ? 300 : 100);
  }
  // A 0-d leaf is one element in block 0.
  const BlockLayout scalar = *BlockLayout::Make({}, {}, 8, 1, 1000);
  EXPECT_EQ(scalar.total_bytes(), 8);
  EXPECT_EQ(scalar.block_count(), 1);
  EXPECT_EQ(scalar.block_bytes(0), 8);
}

TEST(BlockLayoutTest, EmptyLeavesHaveNoBlocks) {
  EXPECT_EQ(BlockLayout::Make({0}, {0, 5}, 4, 10, 100)->block_count(), 0);
  EXPECT_EQ(BlockLayout::Make({5}, {5, 0}, 4, 10, 100)->block_count(), 0);
  EXPECT_EQ(BlockLayout::Make({}, {0}, 4, 10, 100)->block_count(), 0);
  EXPECT_EQ(BlockLayout::Make({3, 0}, {3, 0, 2}, 4, 10, 100)->block_count(), 0);
  const BlockLayout empty = *BlockLayout::Make({0}, {0, 5}, 4, 10, 100);
  EXPECT_TRUE(Collect(empty, 0, 0, 10).empty());
}

TEST(BlockLayoutTest, LargeGeometriesDoNotOverflow) {
  // 2^40 rows of 1 KiB = 2^50 bytes, with more rows per block than rows:
  // rows_per_block * row_bytes alone would overflow.
  const int64_t rows = int64_t{1} << 40;
  const BlockLayout layout =
      *BlockLayout::Make({rows}, {rows, 128}, 8, int64_t{1} << 61, int64_t{1} << 29);
  EXPECT_EQ(layout.total_bytes(), int64_t{1} << 50);
  EXPECT_EQ(layout.block_count(), 1);
  EXPECT_EQ(layout.block_bytes(0), int64_t{1} << 50);
  EXPECT_EQ(layout.part_count(0), int64_t{1} << 21);
  const std::vector<Segment> s =
      Collect(layout, (int64_t{1} << 50) - 100, 100, int64_t{1} << 30);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].part, (int64_t{1} << 21) - 1);
  EXPECT_EQ(s[0].offset_in_part, (int64_t{1} << 29) - 100);
}

TEST(BlockLayoutTest, InvalidArgumentsRejected) {
  const auto code = [](const absl::StatusOr<BlockLayout>& l) { return l.status().code(); };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(BlockLayout::Make({4}, {4, 2}, 4, 0, 100)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({4}, {4, 2}, 4, -1, 100)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({4}, {4, 2}, 4, 10, 0)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({4}, {4, 2}, 4, 10, -5)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({}, {4, 2}, 4, 0, 100)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({4}, {4, 2}, 0, 10, 100)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({4}, {5, 2}, 4, 10, 100)), kInvalid);   // not a prefix
  EXPECT_EQ(code(BlockLayout::Make({4, 2}, {4}, 4, 10, 100)), kInvalid);   // longer batch
  EXPECT_EQ(code(BlockLayout::Make({-4}, {-4, 2}, 4, 10, 100)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({4}, {4, -2}, 4, 10, 100)), kInvalid);
  EXPECT_EQ(code(BlockLayout::Make({int64_t{1} << 62}, {int64_t{1} << 62, 4}, 8, 10, 100)),
            kInvalid);  // overflow
  EXPECT_TRUE(BlockLayout::Make({4}, {4}, 4, 10, 100).ok());  // leaf == batch shape
}

TEST(BlockLayoutTest, OutOfRangeRequestsYieldNothing) {
  const BlockLayout layout = *BlockLayout::Make({10}, {10, 3}, 4, 4, 20);
  EXPECT_TRUE(Collect(layout, -1, 5, 10).empty());
  EXPECT_TRUE(Collect(layout, 0, -1, 10).empty());
  EXPECT_TRUE(Collect(layout, 100, 21, 10).empty());
  EXPECT_TRUE(Collect(layout, 121, 0, 10).empty());
  EXPECT_TRUE(Collect(layout, 0, 10, 0).empty());
  EXPECT_TRUE(Collect(layout, 5, std::numeric_limits<int64_t>::max(), 10).empty());
  EXPECT_EQ(layout.block_bytes(3), 0);
  EXPECT_EQ(layout.part_size(0, 3), 0);
}

}  // namespace
}  // namespace tdstore
