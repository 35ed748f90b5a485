// The index planner without torch: hand-checked cases and every error path.
// tests/unit_torch/index_torch_test.cc compares it with torch at random.
#include "common/index.h"

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/block_layout.h"
#include "common/shape.h"
#include "gtest/gtest.h"

namespace tdstore::plan {

// For EXPECT_EQ on vectors of runs (found by ADL, so not in the anonymous
// namespace).
bool operator==(const ByteRun& a, const ByteRun& b) {
  return a.leaf_offset == b.leaf_offset && a.length == b.length &&
         a.result_offset == b.result_offset;
}
std::ostream& operator<<(std::ostream& os, const ByteRun& r) {
  return os << "{leaf " << r.leaf_offset << " len " << r.length << " result " << r.result_offset
            << "}";
}
bool operator==(const PartRun& a, const PartRun& b) {
  return a.block == b.block && a.part == b.part && a.offset_in_part == b.offset_in_part &&
         a.length == b.length && a.result_offset == b.result_offset;
}
std::ostream& operator<<(std::ostream& os, const PartRun& r) {
  return os << "{block " << r.block << " part " << r.part << " at " << r.offset_in_part << " len "
            << r.length << " result " << r.result_offset << "}";
}

namespace {

using Kind = IndexTerm::Kind;
using absl::StatusCode;
using Cells = std::vector<int64_t>;

constexpr auto kAll = std::nullopt;

// Resolves and expects success.
ResolvedIndex Resolve(const IndexSpec& index, const Shape& batch) {
  absl::StatusOr<ResolvedIndex> r = ResolveIndex(index, batch);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ResolvedIndex{};
}

StatusCode ResolveCode(const IndexSpec& index, const Shape& batch) {
  return ResolveIndex(index, batch).status().code();
}

IndexTerm P(std::vector<int64_t> positions) { return IndexTerm::Positions(std::move(positions)); }
IndexTerm P(std::vector<int64_t> positions, Shape shape) {
  return IndexTerm::Positions(std::move(positions), std::move(shape));
}
IndexTerm I(int64_t v) { return IndexTerm::Int(v); }
IndexTerm S(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) {
  return IndexTerm::Slice(start, stop, step);
}
IndexTerm All() { return IndexTerm::All(); }
IndexTerm E() { return IndexTerm::Ellipsis(); }

// ---------------------------------------------------------------------------
// ResolveIndex: results (expected values worked out by hand and checked
// against torch 1.13; batch [2, 3, 4] holds cells 0..23).

TEST(ResolveIndexTest, IntsSelectAndRemoveTheirDim) {
  ResolvedIndex r = Resolve({I(3)}, {5});
  EXPECT_EQ(r.result_shape, Shape{});
  EXPECT_EQ(r.cells, Cells{3});
  EXPECT_EQ(Resolve({I(-1)}, {5}).cells, Cells{4});
  EXPECT_EQ(Resolve({I(-5)}, {5}).cells, Cells{0});

  r = Resolve({I(1), I(2)}, {3, 4});
  EXPECT_EQ(r.result_shape, Shape{});
  EXPECT_EQ(r.cells, Cells{6});
  r = Resolve({I(1)}, {3, 4});  // missing trailing dims mean ':'
  EXPECT_EQ(r.result_shape, Shape{4});
  EXPECT_EQ(r.cells, (Cells{4, 5, 6, 7}));
}

TEST(ResolveIndexTest, SlicesClampLikePython) {
  auto cells = [](IndexTerm slice) { return Resolve({std::move(slice)}, {5}).cells; };
  EXPECT_EQ(cells(S(1, 4)), (Cells{1, 2, 3}));
  EXPECT_EQ(cells(S(kAll, kAll, 2)), (Cells{0, 2, 4}));
  EXPECT_EQ(cells(S(-3, kAll)), (Cells{2, 3, 4}));
  EXPECT_EQ(cells(S(kAll, -1)), (Cells{0, 1, 2, 3}));
  EXPECT_EQ(cells(S(-100, 100)), (Cells{0, 1, 2, 3, 4}));
  EXPECT_EQ(cells(S(1, kAll, 100)), Cells{1});
  EXPECT_EQ(cells(S(3, 10, 2)), Cells{3});
  EXPECT_EQ(cells(S(INT64_MIN, INT64_MAX, INT64_MAX)), Cells{0});

  ResolvedIndex r = Resolve({S(4, 1)}, {5});
  EXPECT_EQ(r.result_shape, Shape{0});
  EXPECT_TRUE(r.cells.empty());

  r = Resolve({All(), S(1, 3)}, {2, 4});
  EXPECT_EQ(r.result_shape, (Shape{2, 2}));
  EXPECT_EQ(r.cells, (Cells{1, 2, 5, 6}));
}

TEST(ResolveIndexTest, PositionsKeepTheirShapeOrderAndDuplicates) {
  ResolvedIndex r = Resolve({P({-1, 0, -1, 2})}, {5});
  EXPECT_EQ(r.result_shape, Shape{4});
  EXPECT_EQ(r.cells, (Cells{4, 0, 4, 2}));

  r = Resolve({P({0, 1, 2, 3}, {2, 2})}, {5, 2});
  EXPECT_EQ(r.result_shape, (Shape{2, 2, 2}));
  EXPECT_EQ(r.cells, (Cells{0, 1, 2, 3, 4, 5, 6, 7}));

  r = Resolve({P({}, {0})}, {2, 3});  // x[[]]
  EXPECT_EQ(r.result_shape, (Shape{0, 3}));
  EXPECT_TRUE(r.cells.empty());
}

TEST(ResolveIndexTest, MasksSelectTheirTrueEntries) {
  ResolvedIndex r = Resolve({IndexTerm::Mask({true, false, true, false})}, {4});
  EXPECT_EQ(r.result_shape, Shape{2});
  EXPECT_EQ(r.cells, (Cells{0, 2}));

  r = Resolve({All(), IndexTerm::Mask({false, true, true})}, {2, 3});
  EXPECT_EQ(r.result_shape, (Shape{2, 2}));
  EXPECT_EQ(r.cells, (Cells{1, 2, 4, 5}));

  r = Resolve({IndexTerm::Mask({false, false})}, {2, 3});
  EXPECT_EQ(r.result_shape, (Shape{0, 3}));
}

TEST(ResolveIndexTest, EllipsisAndEmptyIndex) {
  ResolvedIndex r = Resolve({E(), I(1)}, {2, 3, 4});
  EXPECT_EQ(r.result_shape, (Shape{2, 3}));
  EXPECT_EQ(r.cells, (Cells{1, 5, 9, 13, 17, 21}));

  r = Resolve({I(1), E(), I(2)}, {2, 3, 4});
  EXPECT_EQ(r.cells, (Cells{14, 18, 22}));
  EXPECT_EQ(Resolve({I(0), I(0), I(0), E()}, {2, 3, 4}).cells, Cells{0});

  for (const IndexSpec& identity : {IndexSpec{}, IndexSpec{E()}}) {
    r = Resolve(identity, {2, 2});
    EXPECT_EQ(r.result_shape, (Shape{2, 2}));
    EXPECT_EQ(r.cells, (Cells{0, 1, 2, 3}));
    r = Resolve(identity, {});  // a dict without batch dims has one cell
    EXPECT_EQ(r.result_shape, Shape{});
    EXPECT_EQ(r.cells, Cells{0});
  }
}

// Torch applies ints first (as select), then lays advanced indices out over
// the dims that remain — unlike NumPy, which treats ints as advanced.
TEST(ResolveIndexTest, IntsAreRemovedBeforeAdvancedIndicesAreLaidOut) {
  const Shape x{2, 3, 4};
  ResolvedIndex r = Resolve({I(0), All(), P({1, 2})}, x);  // NumPy: [2, 3]
  EXPECT_EQ(r.result_shape, (Shape{3, 2}));
  EXPECT_EQ(r.cells, (Cells{1, 2, 5, 6, 9, 10}));

  r = Resolve({P({0, 1}), I(0), P({1, 2})}, x);  // adjacent once the int is gone
  EXPECT_EQ(r.result_shape, Shape{2});
  EXPECT_EQ(r.cells, (Cells{1, 14}));

  r = Resolve({P({0, 1}), All(), P({1, 2})}, x);  // not adjacent: goes first
  EXPECT_EQ(r.result_shape, (Shape{2, 3}));
  EXPECT_EQ(r.cells, (Cells{1, 5, 9, 14, 18, 22}));

  r = Resolve({All(), P({0, 1}, {2, 1}), P({0, 1, 2})}, x);  // adjacent, in place
  EXPECT_EQ(r.result_shape, (Shape{2, 2, 3}));
  EXPECT_EQ(r.cells, (Cells{0, 1, 2, 4, 5, 6, 12, 13, 14, 16, 17, 18}));

  // Split by a slice, with a slice before: the index dims still go first.
  r = Resolve({All(), P({0, 1}), All(), P({1, 2})}, {2, 2, 2, 3});
  EXPECT_EQ(r.result_shape, (Shape{2, 2, 2}));
  EXPECT_EQ(r.cells, (Cells{1, 4, 13, 16, 8, 11, 20, 23}));

  r = Resolve({E(), P({1, 2}), I(0)}, x);
  EXPECT_EQ(r.result_shape, (Shape{2, 2}));
  EXPECT_EQ(r.cells, (Cells{4, 8, 16, 20}));
}

// Torch treats a 0-d position tensor exactly like an int.
TEST(ResolveIndexTest, ZeroDimPositionsActAsInts) {
  const Shape x{2, 3, 4};
  ResolvedIndex r = Resolve({P({1}, {}), All(), P({1, 2})}, x);
  EXPECT_EQ(r.result_shape, (Shape{3, 2}));
  EXPECT_EQ(r.cells, (Cells{13, 14, 17, 18, 21, 22}));

  r = Resolve({P({0, 1}), P({1}, {}), P({1, 2})}, x);
  EXPECT_EQ(r.result_shape, Shape{2});
  EXPECT_EQ(r.cells, (Cells{5, 18}));

  r = Resolve({P({-1}, {})}, {5});
  EXPECT_EQ(r.result_shape, Shape{});
  EXPECT_EQ(r.cells, Cells{4});
  EXPECT_EQ(ResolveCode({P({5}, {})}, {5}), StatusCode::kOutOfRange);
}

// Torch bounds-checks positions only where its kernel visits them, plus any
// index into a dim of size 0 when the broadcast index shape is not empty.
TEST(ResolveIndexTest, PositionsAreCheckedOnlyWhereTorchChecksThem) {
  ResolvedIndex r = Resolve({P({5}), P({})}, {2, 3});  // broadcast shape [0]
  EXPECT_EQ(r.result_shape, Shape{0});
  r = Resolve({P({5})}, {3, 0});  // result [1, 0]: nothing visited
  EXPECT_EQ(r.result_shape, (Shape{1, 0}));
  EXPECT_TRUE(r.cells.empty());
  r = Resolve({All(), P({5})}, {0, 3});
  EXPECT_EQ(r.result_shape, (Shape{0, 1}));

  EXPECT_EQ(ResolveCode({P({0})}, {0, 3}), StatusCode::kOutOfRange);
  EXPECT_EQ(ResolveCode({All(), P({0}), P({0})}, {3, 0, 2}), StatusCode::kOutOfRange);
  EXPECT_EQ(ResolveCode({P({7}), P({0})}, {3, 0, 2}), StatusCode::kOutOfRange);
  EXPECT_EQ(Resolve({All(), P({0}), P({})}, {3, 0, 2}).result_shape, (Shape{3, 0}));
  EXPECT_EQ(ResolveCode({P({0})}, {0, 0}), StatusCode::kOutOfRange);  // result [1, 0]
}

// ---------------------------------------------------------------------------
// ResolveIndex: errors.

TEST(ResolveIndexTest, OutOfRangeIntsAndPositions) {
  for (int64_t v : std::vector<int64_t>{5, 6, -6, INT64_MAX, INT64_MIN}) {
    const absl::Status s = ResolveIndex({I(v)}, {5}).status();
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << v;
    EXPECT_NE(s.message().find("index item 0"), std::string::npos) << s;
    EXPECT_NE(s.message().find("dim 0"), std::string::npos) << s;
    EXPECT_EQ(ResolveCode({P({0, v, 1})}, {5}), StatusCode::kOutOfRange) << v;
    EXPECT_EQ(ResolveCode({P({v}, {})}, {5}), StatusCode::kOutOfRange) << v;
  }
  const absl::Status s = ResolveIndex({All(), P({1, 3})}, {4, 3}).status();
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("index item 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("dim 1"), std::string::npos) << s;

  // An int into an empty dim fails even though the result would be empty.
  EXPECT_EQ(ResolveCode({I(0)}, {0}), StatusCode::kOutOfRange);
  EXPECT_EQ(ResolveCode({All(), I(0)}, {0, 0}), StatusCode::kOutOfRange);
}

TEST(ResolveIndexTest, BadSteps) {
  for (int64_t step : std::vector<int64_t>{0, -1, INT64_MIN}) {
    const absl::Status s = ResolveIndex({All(), S(kAll, kAll, step)}, {3, 3}).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << step;
    EXPECT_NE(s.message().find("index item 1"), std::string::npos) << s;
    // ResolveIndex's error is the one rule's, which the client core applies
    // before sending (client/core/src/convert.cc).
    EXPECT_EQ(s, CheckSliceStep(1, step));
  }
  EXPECT_TRUE(CheckSliceStep(0, 1).ok());
  EXPECT_TRUE(CheckSliceStep(0, INT64_MAX).ok());
  const absl::Status s = CheckSliceStep(4, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "index item 4: slice step must be greater than zero, got 0");
}

TEST(ResolveIndexTest, MaskLengthMustEqualTheDim) {
  EXPECT_EQ(ResolveCode({IndexTerm::Mask({true, false})}, {3}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({IndexTerm::Mask({true, false, true, true})}, {3}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({IndexTerm::Mask({})}, {3}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({All(), IndexTerm::Mask({true})}, {3, 0}), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ResolveIndex({IndexTerm::Mask({})}, {0}).ok());
}

TEST(ResolveIndexTest, EllipsisAtMostOnce) {
  EXPECT_EQ(ResolveCode({E(), E()}, {2, 3}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({E(), I(0), E()}, {2, 3}), StatusCode::kInvalidArgument);
}

TEST(ResolveIndexTest, TooManyItems) {
  EXPECT_EQ(ResolveCode({I(0), I(0), I(0)}, {2, 3}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({All(), All(), E(), P({0})}, {2, 3}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({I(0)}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({P({0}, {})}, {}), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ResolveIndex({I(0), I(0), E()}, {2, 3}).ok());
}

TEST(ResolveIndexTest, AdvancedIndicesMustBroadcast) {
  EXPECT_EQ(ResolveCode({P({0, 1}), P({0, 1, 2})}, {3, 3}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({P({0, 1}, {2, 1}), P({0, 1, 2}, {1, 3}), P({0, 0}, {1, 2})}, {3, 3, 3}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({IndexTerm::Mask({true, true, false}), P({0, 1, 2})}, {3, 3}),
            StatusCode::kInvalidArgument);
  // [2, 1] with [3] broadcasts to [2, 3]; [1] with [0] to [0].
  EXPECT_EQ(Resolve({P({0, 1}, {2, 1}), P({0, 1, 2})}, {3, 3}).result_shape, (Shape{2, 3}));
  EXPECT_EQ(Resolve({P({0}), P({})}, {3, 3}).result_shape, Shape{0});
}

TEST(ResolveIndexTest, MalformedPositions) {
  EXPECT_EQ(ResolveCode({P({0, 1, 2}, {2, 2})}, {5}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({P({0}, {-1})}, {5}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({P({}, {})}, {5}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({P({}, {INT64_MAX, INT64_MAX, 0})}, {5}), StatusCode::kOk);
}

// Torch checks ints as it meets them and masks only afterwards, so an
// out-of-range int wins over a bad mask to its left.
TEST(ResolveIndexTest, ErrorsComeInTorchOrder) {
  EXPECT_EQ(ResolveCode({IndexTerm::Mask({true}), I(9)}, {2, 3}), StatusCode::kOutOfRange);
  EXPECT_EQ(ResolveCode({P({9}), S(kAll, kAll, 0)}, {2, 3}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({P({9}), P({0, 1})}, {2, 3}), StatusCode::kOutOfRange);
  EXPECT_EQ(ResolveCode({P({9, 0}), P({0, 1, 2})}, {2, 3}), StatusCode::kInvalidArgument);
}

TEST(ResolveIndexTest, RejectsBadBatchShapes) {
  EXPECT_EQ(ResolveCode({}, {2, -1}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveCode({}, {INT64_MAX, 2}), StatusCode::kInvalidArgument);
}

// Found by tests/fuzz (fuzz_index_planner, fuzz_request_validators): a batch
// with a dim of 0 is valid however large its other dims, but multiplying
// those into strides overflowed int64 (undefined behaviour; the inputs are
// in tests/fuzz/regressions/). Such a batch has no cells: every index gives
// an empty result or an error.
TEST(ResolveIndexTest, EmptyBatchWithHugeDims) {
  constexpr int64_t kHuge = int64_t{1} << 62;
  const Shape batch = {0, kHuge, 2, 5};
  EXPECT_EQ(ResolveCode({I(-1)}, batch), StatusCode::kOutOfRange);

  ResolvedIndex r = Resolve({E(), I(1), I(-1)}, batch);
  EXPECT_EQ(r.result_shape, (Shape{0, kHuge}));
  EXPECT_TRUE(r.cells.empty());

  r = Resolve({All(), I(kHuge - 1), P({1, 0})}, batch);
  EXPECT_EQ(r.result_shape, (Shape{0, 2, 5}));
  EXPECT_TRUE(r.cells.empty());

  r = Resolve({E()}, {10, 31, 0, 0, 0, 1125899906842623, 10, 4, 18, 3099, 2});
  EXPECT_EQ(r.result_shape, (Shape{10, 31, 0, 0, 0, 1125899906842623, 10, 4, 18, 3099, 2}));
  EXPECT_TRUE(r.cells.empty());
}

// ---------------------------------------------------------------------------
// PlanRuns and SplitRuns

TEST(PlanRunsTest, CoalescesCellsAdjacentInTheLeaf) {
  ResolvedIndex r;
  r.cells = {0, 1, 2, 5, 6, 3, 3, 2};
  EXPECT_EQ(PlanRuns(r, 4),
            (std::vector<ByteRun>{{0, 12, 0}, {20, 8, 12}, {12, 4, 20}, {12, 4, 24}, {8, 4, 28}}));
  EXPECT_EQ(PlanRuns(r, 1),
            (std::vector<ByteRun>{{0, 3, 0}, {5, 2, 3}, {3, 1, 5}, {3, 1, 6}, {2, 1, 7}}));
  EXPECT_TRUE(PlanRuns(r, 0).empty());
  EXPECT_TRUE(PlanRuns(ResolvedIndex{}, 4).empty());

  // A slice of whole rows is one run.
  ResolvedIndex rows = Resolve({S(2, 7)}, {10, 3});
  EXPECT_EQ(PlanRuns(rows, 8), (std::vector<ByteRun>{{48, 120, 0}}));
}

// In AscendingCells' order, the runs come in leaf order; cells merge only
// where the leaf and the result bytes both follow on; together the runs
// still put every cell where PlanRuns in result order puts it.
TEST(PlanRunsTest, InAscendingOrderRunsComeInLeafOrderAndLandWhereResultOrderPutsThem) {
  ResolvedIndex r;
  r.cells = {5, 6, 0, 1, 3, 3, 2};
  const std::vector<int64_t> order = AscendingCells(r);
  EXPECT_EQ(order, (std::vector<int64_t>{2, 3, 6, 4, 5, 0, 1}));  // ties in result order
  // Cells 0 and 1 merge; the two 3s cannot (the leaf goes back).
  EXPECT_EQ(PlanRuns(r, 4, &order),
            (std::vector<ByteRun>{{0, 8, 8}, {8, 4, 24}, {12, 4, 16}, {12, 4, 20}, {20, 8, 0}}));
  // Already ascending: no order needed.
  ResolvedIndex sorted;
  sorted.cells = {0, 0, 4, 9};
  EXPECT_TRUE(AscendingCells(sorted).empty());
  EXPECT_TRUE(AscendingCells(ResolvedIndex{}).empty());

  // Random indices: every result byte comes from the cell result order
  // names, and the runs' leaf offsets never go back.
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    ResolvedIndex random;
    const int64_t cells = std::uniform_int_distribution<int64_t>(1, 40)(rng);
    for (int64_t i = 0; i < cells; ++i) {
      random.cells.push_back(std::uniform_int_distribution<int64_t>(0, 30)(rng));
    }
    const int64_t cell_bytes = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    const std::vector<int64_t> asc = AscendingCells(random);
    const std::vector<ByteRun> runs = PlanRuns(random, cell_bytes, asc.empty() ? nullptr : &asc);
    std::vector<int64_t> source(static_cast<size_t>(cells * cell_bytes), -1);
    int64_t last = -1;
    for (const ByteRun& run : runs) {
      EXPECT_GE(run.leaf_offset, last);
      last = run.leaf_offset;
      for (int64_t b = 0; b < run.length; ++b) {
        source[static_cast<size_t>(run.result_offset + b)] = run.leaf_offset + b;
      }
    }
    for (int64_t i = 0; i < cells * cell_bytes; ++i) {
      EXPECT_EQ(source[static_cast<size_t>(i)],
                random.cells[static_cast<size_t>(i / cell_bytes)] * cell_bytes + i % cell_bytes)
          << "trial " << trial << " byte " << i;
    }
  }
}

TEST(SplitRunsTest, SplitsAtPartsAndBlocks) {
  // Rows of 3 * 2 = 6 bytes, 4 rows (24 bytes) a block, parts of 10, 10, 4.
  absl::StatusOr<BlockLayout> layout = BlockLayout::Make({10}, {10, 3}, 2, 4, 10);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(SplitRuns({{8, 40, 100}}, *layout), (std::vector<PartRun>{{0, 0, 8, 2, 100},
                                                                      {0, 1, 0, 10, 102},
                                                                      {0, 2, 0, 4, 112},
                                                                      {1, 0, 0, 10, 116},
                                                                      {1, 1, 0, 10, 126},
                                                                      {1, 2, 0, 4, 136}}));
  // Result order is kept even when the leaf offsets go backwards; the last
  // block holds 2 rows (12 bytes: parts of 10 and 2).
  EXPECT_EQ(SplitRuns({{54, 6, 0}, {0, 6, 6}}, *layout),
            (std::vector<PartRun>{{2, 0, 6, 4, 0}, {2, 1, 0, 2, 4}, {0, 0, 0, 6, 6}}));
  EXPECT_TRUE(SplitRuns({}, *layout).empty());
}

// Random runs split, then read back through a map of part values, give the
// same bytes as reading the leaf directly.
TEST(SplitRunsTest, RandomRunsReassemble) {
  std::mt19937_64 rng(7);
  for (int iteration = 0; iteration < 300; ++iteration) {
    const int64_t rows = 1 + rng() % 40, row_bytes = 1 + rng() % 9;
    absl::StatusOr<BlockLayout> layout =
        BlockLayout::Make({rows}, {rows, row_bytes}, 1, 1 + rng() % 7, 1 + rng() % 20);
    ASSERT_TRUE(layout.ok());
    std::string leaf(rows * row_bytes, '\0');
    for (char& c : leaf) c = static_cast<char>(rng());
    std::map<std::pair<int64_t, int64_t>, std::string> parts;
    for (int64_t b = 0; b < layout->block_count(); ++b) {
      for (int64_t p = 0; p < layout->part_count(b); ++p) {
        parts[{b, p}] = leaf.substr(layout->block_offset(b) + p * layout->part_bytes(),
                                    layout->part_size(b, p));
      }
    }
    std::vector<ByteRun> runs;
    std::string expected;
    for (int n = rng() % 5; n > 0; --n) {
      const int64_t offset = rng() % leaf.size();
      const int64_t length = rng() % (leaf.size() - offset + 1);
      runs.push_back({offset, length, static_cast<int64_t>(expected.size())});
      expected += leaf.substr(offset, length);
    }
    std::string actual(expected.size(), '?');
    int64_t result_offset = 0;
    for (const PartRun& run : SplitRuns(runs, *layout)) {
      const std::string& part = parts.at({run.block, run.part});
      ASSERT_GT(run.length, 0);
      ASSERT_LE(run.offset_in_part + run.length, static_cast<int64_t>(part.size()));
      ASSERT_EQ(run.result_offset, result_offset);  // in result order, no gaps
      actual.replace(run.result_offset, run.length, part, run.offset_in_part, run.length);
      result_offset += run.length;
    }
    EXPECT_EQ(actual, expected);
  }
}

// ---------------------------------------------------------------------------
// BroadcastBytes

// A byte-by-byte reference: target cell c reads value cell c with broadcast
// dims pinned to 0.
std::string NaiveBroadcast(const std::string& value, const Shape& value_shape, const Shape& target,
                           int64_t elem_size) {
  const size_t lead = target.size() - value_shape.size();
  const int64_t numel = *ByteSize(target, 1);
  std::string out;
  for (int64_t c = 0; c < numel; ++c) {
    int64_t rest = c, src = 0, stride = 1;
    for (size_t d = target.size(); d-- > 0;) {
      const int64_t i = rest % target[d];
      rest /= target[d];
      if (d >= lead) {
        const int64_t v = value_shape[d - lead];
        if (v != 1) src += i * stride;
        stride *= v;
      }
    }
    out += value.substr(src * elem_size, elem_size);
  }
  return out;
}

std::string Bytes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(BroadcastBytesTest, ExpandsAsTorchDoes) {
  absl::StatusOr<std::string> out = BroadcastBytes("ab", {}, {2, 3}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "abababababab");
  out = BroadcastBytes("xyz", {3}, {2, 3}, 1);
  EXPECT_EQ(*out, "xyzxyz");
  out = BroadcastBytes("xy", {2, 1}, {2, 3}, 1);
  EXPECT_EQ(*out, "xxxyyy");
  out = BroadcastBytes("xy", {1, 2, 1}, {3, 2, 2}, 1);
  EXPECT_EQ(*out, "xxyyxxyyxxyy");
  out = BroadcastBytes("abcd", {2, 2}, {2, 2}, 1);
  EXPECT_EQ(*out, "abcd");
  out = BroadcastBytes("q", {1}, {0}, 1);
  EXPECT_EQ(*out, "");
  out = BroadcastBytes("", {0}, {4, 0}, 8);
  EXPECT_EQ(*out, "");
  out = BroadcastBytes("abc", {}, {}, 3);
  EXPECT_EQ(*out, "abc");
}

TEST(BroadcastBytesTest, RandomShapesMatchANaiveExpand) {
  std::mt19937_64 rng(11);
  for (int iteration = 0; iteration < 2000; ++iteration) {
    Shape target(rng() % 5);
    for (int64_t& d : target) d = rng() % 5;
    Shape value(target.begin() + rng() % (target.size() + 1), target.end());
    for (int64_t& d : value) {
      if (rng() % 3 == 0) d = 1;
    }
    const int64_t elem_size = 1 + rng() % 9;
    const std::string bytes = Bytes(*ByteSize(value, elem_size), iteration);
    absl::StatusOr<std::string> out = BroadcastBytes(bytes, value, target, elem_size);
    ASSERT_TRUE(out.ok()) << ShapeToString(value) << " -> " << ShapeToString(target);
    EXPECT_EQ(*out, NaiveBroadcast(bytes, value, target, elem_size))
        << ShapeToString(value) << " -> " << ShapeToString(target);
  }
}

TEST(BroadcastBytesTest, Rejects) {
  auto code = [](std::string_view value, Shape from, Shape to, int64_t elem_size) {
    return BroadcastBytes(value, from, to, elem_size).status().code();
  };
  EXPECT_EQ(code("abc", {3}, {2, 4}, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("abcdef", {2, 3}, {3}, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("ab", {2}, {}, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", {1, 1}, {1}, 1), StatusCode::kInvalidArgument);  // expand, not setitem
  EXPECT_EQ(code("", {0}, {3}, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("ab", {3}, {3}, 1), StatusCode::kInvalidArgument);  // too few bytes
  EXPECT_EQ(code("abcd", {3}, {3}, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", {}, {2}, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", {-1}, {2}, 1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", {}, {INT64_MAX, 2}, 1), StatusCode::kInvalidArgument);

  const absl::Status s = BroadcastBytes("abc", {3}, {2, 4}, 1).status();
  EXPECT_NE(s.message().find("[3]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[2, 4]"), std::string::npos) << s;
}

}  // namespace
}  // namespace tdstore::plan
