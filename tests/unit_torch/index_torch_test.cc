// The index planner against torch itself, on thousands of random cases: the
// result shape and cells of ResolveIndex against at::Tensor::index, bytes
// read and written through PlanRuns/SplitRuns against index and index_put_,
// and BroadcastBytes against expand. Every failure message carries the case.
//
// <ATen/ATen.h>, not <torch/torch.h>: the latter costs 15+ s per compile.
#include <ATen/ATen.h>
#include <c10/util/Logging.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/block_layout.h"
#include "common/index.h"
#include "common/shape.h"

namespace tdstore::plan {
namespace {

using absl::StatusCode;
using Kind = IndexTerm::Kind;

// Torch symbolizes a backtrace for every c10::Error it throws (milliseconds
// each); thousands of expected errors would take most of the run.
class NoTorchBacktraces : public ::testing::Environment {
 public:
  void SetUp() override {
    c10::SetStackTraceFetcher([] { return std::string("(backtrace disabled by the test)"); });
  }
};
const auto* const kNoTorchBacktraces = ::testing::AddGlobalTestEnvironment(new NoTorchBacktraces);

// ---------------------------------------------------------------------------
// Random cases

class CaseMaker {
 public:
  explicit CaseMaker(uint64_t seed) : rng_(seed) {}

  int64_t Uniform(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool OneIn(int n) { return Uniform(1, n) == 1; }

  // Rank 1..3, dims 0..12; now and then rank 0, or rank 4 with dims 0..5
  // (the least rank where a slice can stand before split advanced indices,
  // as in x[:, [0], :, [1]], whose result puts the index dims first).
  Shape Batch() {
    if (OneIn(20)) return {};
    const bool four = OneIn(4);
    Shape batch(four ? 4 : Uniform(1, 3));
    for (int64_t& d : batch) d = Uniform(0, four ? 5 : 12);
    return batch;
  }

  // A tuple over `batch`: a term for each dim, then perhaps an ellipsis in
  // place of some of them, trailing terms dropped, or (rarely) one term too
  // many or a second ellipsis.
  IndexSpec Spec(const Shape& batch) {
    // Advanced indices mostly take shapes that broadcast to one shape.
    common_.assign(Uniform(0, 2), 0);
    for (int64_t& d : common_) d = OneIn(6) ? 0 : Uniform(1, 3);

    IndexSpec spec;
    for (int64_t size : batch) spec.push_back(Term(size));
    if (OneIn(3)) {
      const size_t from = Uniform(0, spec.size());
      const size_t to = Uniform(from, spec.size());
      spec.erase(spec.begin() + from, spec.begin() + to);
      spec.insert(spec.begin() + from, IndexTerm::Ellipsis());
    } else if (OneIn(3)) {
      spec.resize(Uniform(0, spec.size()));
    }
    if (OneIn(25)) spec.push_back(Term(Uniform(0, 5)));
    if (OneIn(40)) spec.insert(spec.begin() + Uniform(0, spec.size()), IndexTerm::Ellipsis());
    return spec;
  }

  Shape ElemShape() {
    Shape shape(Uniform(0, 2));
    for (int64_t& d : shape) d = OneIn(10) ? 0 : Uniform(1, 3);
    return shape;
  }

  std::vector<uint8_t> Bytes(int64_t n) {
    std::vector<uint8_t> bytes(n);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng_());
    return bytes;
  }

 private:
  // A position for a dim of `size`: mostly valid (either sign), now and then
  // just out of range or far out.
  int64_t Position(int64_t size) {
    if (size == 0 || OneIn(30)) {
      switch (Uniform(0, 3)) {
        case 0:
          return size;
        case 1:
          return -size - 1;
        case 2:
          return Uniform(size, size + 100);
        default:
          return -Uniform(size + 1, size + 100);
      }
    }
    return Uniform(-size, size - 1);
  }

  std::optional<int64_t> Bound() {
    if (OneIn(3)) return std::nullopt;
    return Uniform(-15, 15);
  }

  // A shape that broadcasts to common_ (or, now and then, any shape).
  Shape PositionsShape() {
    Shape shape;
    if (OneIn(10)) {
      shape.resize(Uniform(1, 3));
      for (int64_t& d : shape) d = Uniform(0, 3);
      return shape;
    }
    shape.assign(common_.begin() + Uniform(0, common_.size()), common_.end());
    for (int64_t& d : shape) {
      if (OneIn(3)) d = 1;
    }
    if (shape.empty()) shape = {OneIn(2) ? 1 : Uniform(0, 4)};  // 0-d is its own kind
    return shape;
  }

  IndexTerm Term(int64_t size) {
    switch (Uniform(0, 10)) {
      case 0:
      case 1:
        return IndexTerm::Int(Position(size));
      case 2:
      case 3:
        return IndexTerm::Slice(Bound(), Bound(), OneIn(25) ? Uniform(-2, 0) : Uniform(1, 4));
      case 4:
        return IndexTerm::All();
      case 5:
        return IndexTerm::Positions({Position(size)}, Shape{});
      case 6:
      case 7: {
        std::vector<bool> mask(OneIn(20) ? Uniform(0, size + 1) : size);
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = OneIn(2);
        return IndexTerm::Mask(std::move(mask));
      }
      default: {
        Shape shape = PositionsShape();
        std::vector<int64_t> positions(*ByteSize(shape, 1));
        for (int64_t& p : positions) p = Position(size);
        return IndexTerm::Positions(std::move(positions), std::move(shape));
      }
    }
  }

  std::mt19937_64 rng_;
  Shape common_;
};

std::string ToString(const IndexSpec& spec) {
  std::string out = "[";
  for (const IndexTerm& term : spec) {
    if (out.size() > 1) out += ", ";
    switch (term.kind) {
      case Kind::kInt:
        out += std::to_string(term.value);
        break;
      case Kind::kSlice:
        if (term.start) out += std::to_string(*term.start);
        out += ":";
        if (term.stop) out += std::to_string(*term.stop);
        out += ":" + std::to_string(term.step);
        break;
      case Kind::kPositions: {
        out += "pos{";
        for (size_t i = 0; i < term.positions.size(); ++i) {
          out += (i ? "," : "") + std::to_string(term.positions[i]);
        }
        out += "}" + ShapeToString(term.positions_shape);
        break;
      }
      case Kind::kMask:
        out += "mask{";
        for (bool b : term.mask) out += b ? "1" : "0";
        out += "}";
        break;
      case Kind::kEllipsis:
        out += "...";
        break;
    }
  }
  return out + "]";
}

std::string Describe(const Shape& batch, const IndexSpec& spec) {
  return "batch " + ShapeToString(batch) + " index " + ToString(spec);
}

// ---------------------------------------------------------------------------
// Torch's side

at::Tensor LongTensor(const std::vector<int64_t>& values, const Shape& shape) {
  at::Tensor t = at::empty(shape, at::kLong);
  if (!values.empty()) std::memcpy(t.data_ptr<int64_t>(), values.data(), values.size() * 8);
  return t;
}

at::Tensor ByteTensor(const std::vector<uint8_t>& bytes, const Shape& shape) {
  at::Tensor t = at::empty(shape, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::vector<uint8_t> BytesOf(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const uint8_t* data = c.data_ptr<uint8_t>();
  return std::vector<uint8_t>(data, data + c.numel());
}

c10::optional<int64_t> OrNull(std::optional<int64_t> v) {
  return v ? c10::optional<int64_t>(*v) : c10::nullopt;
}

// May throw c10::Error. A zero step becomes -1: C++ torch throws for 0 as
// the Slice is built, before any other item is looked at, while Python (and
// ResolveIndex, which treats 0 and negative steps alike) reject it in item
// order; torch checks a negative step in item order.
std::vector<at::indexing::TensorIndex> ToTorch(const IndexSpec& spec) {
  using at::indexing::TensorIndex;
  std::vector<TensorIndex> out;
  for (const IndexTerm& term : spec) {
    switch (term.kind) {
      case Kind::kInt:
        out.emplace_back(term.value);
        break;
      case Kind::kSlice:
        out.emplace_back(at::indexing::Slice(OrNull(term.start), OrNull(term.stop),
                                             term.step == 0 ? -1 : term.step));
        break;
      case Kind::kPositions:
        out.emplace_back(LongTensor(term.positions, term.positions_shape));
        break;
      case Kind::kMask: {
        std::vector<uint8_t> bytes(term.mask.begin(), term.mask.end());
        out.emplace_back(ByteTensor(bytes, {static_cast<int64_t>(bytes.size())}).to(at::kBool));
        break;
      }
      case Kind::kEllipsis:
        out.emplace_back(at::indexing::Ellipsis);
        break;
    }
  }
  // Python's x[()] is x; C++ rejects an empty list, so say it as x[...].
  if (out.empty()) out.emplace_back(at::indexing::Ellipsis);
  return out;
}

// The same index with its ellipsis spelled out as ':'s over `rank` batch
// dims, for tensors with more dims than the batch (where `...` would reach
// past the batch dims).
IndexSpec WithoutEllipsis(const IndexSpec& spec, size_t rank) {
  size_t specified = 0;
  for (const IndexTerm& term : spec) specified += term.kind != Kind::kEllipsis;
  IndexSpec out;
  for (const IndexTerm& term : spec) {
    if (term.kind != Kind::kEllipsis) {
      out.push_back(term);
      continue;
    }
    for (size_t n = specified; n < rank; ++n) out.push_back(IndexTerm::All());
  }
  return out;
}

int Ellipses(const IndexSpec& spec) {
  int n = 0;
  for (const IndexTerm& term : spec) n += term.kind == Kind::kEllipsis;
  return n;
}

// ---------------------------------------------------------------------------
// Checks

// True when, once ints are gone, the advanced indices are split by a slice
// and a slice stands before the first of them (so moving the index dims to
// the front matters). `spec` has no ellipsis.
bool MovesAdvancedFirst(const IndexSpec& spec) {
  std::string kinds;  // 's' slice, 'a' advanced, over the dims ints leave
  for (const IndexTerm& term : spec) {
    const bool zero_d = term.kind == Kind::kPositions && term.positions_shape.empty();
    if (term.kind == Kind::kSlice) kinds += 's';
    if ((term.kind == Kind::kPositions && !zero_d) || term.kind == Kind::kMask) kinds += 'a';
  }
  const size_t first = kinds.find('a'), last = kinds.rfind('a');
  return first != std::string::npos && first > 0 && kinds.find('s', first) < last;
}

struct Tally {
  int ok = 0, out_of_range = 0, invalid = 0, empty_results = 0;
  int int_with_advanced = 0, zero_d = 0, masks = 0, duplicates = 0;
  int moved_first = 0;  // split advanced indices with a slice before them
};

// ResolveIndex against x.index(...) on x = arange(numel).view(batch). Returns
// the resolved index when both succeed.
std::optional<ResolvedIndex> CheckResolve(const Shape& batch, const IndexSpec& spec, Tally& tally) {
  SCOPED_TRACE(Describe(batch, spec));
  absl::StatusOr<ResolvedIndex> ours = ResolveIndex(spec, batch);
  // Python rejects two ellipses; C++ torch does not. On a 0-d tensor, C++
  // torch's fast path for a single item skips its "too many indices" check
  // and reports the item as out of bounds; Python says "invalid index of a
  // 0-dim tensor". Both are too many items here.
  int64_t specified = 0;
  for (const IndexTerm& term : spec) specified += term.kind != Kind::kEllipsis;
  if (Ellipses(spec) > 1 || (batch.empty() && specified > 0)) {
    EXPECT_EQ(ours.status().code(), StatusCode::kInvalidArgument) << ours.status();
    ++tally.invalid;
    return std::nullopt;
  }

  at::Tensor expected;
  std::string torch_error;
  try {
    at::Tensor x = at::arange(*ByteSize(batch, 1), at::kLong).view(batch);
    expected = x.index(ToTorch(spec)).contiguous();
  } catch (const c10::Error& e) {
    torch_error = e.what_without_backtrace();
  }

  if (!torch_error.empty()) {
    const bool out_of_range = torch_error.find("out of bounds") != std::string::npos;
    EXPECT_EQ(ours.status().code(),
              out_of_range ? StatusCode::kOutOfRange : StatusCode::kInvalidArgument)
        << "torch: " << torch_error << "\nours: " << ours.status();
    ++(out_of_range ? tally.out_of_range : tally.invalid);
    return std::nullopt;
  }
  EXPECT_TRUE(ours.ok()) << ours.status();
  if (!ours.ok()) return std::nullopt;
  ++tally.ok;

  EXPECT_EQ(ours->result_shape, Shape(expected.sizes().begin(), expected.sizes().end()));
  const int64_t* values = expected.data_ptr<int64_t>();
  EXPECT_EQ(ours->cells, std::vector<int64_t>(values, values + expected.numel()));

  // Coverage of the interesting corners.
  bool has_int = false, has_advanced = false;
  for (const IndexTerm& term : spec) {
    const bool zero_d = term.kind == Kind::kPositions && term.positions_shape.empty();
    has_int |= term.kind == Kind::kInt || zero_d;
    has_advanced |= (term.kind == Kind::kPositions && !zero_d) || term.kind == Kind::kMask;
    tally.zero_d += zero_d;
    tally.masks += term.kind == Kind::kMask;
  }
  tally.int_with_advanced += has_int && has_advanced;
  tally.moved_first += MovesAdvancedFirst(WithoutEllipsis(spec, batch.size()));
  tally.empty_results += ours->cells.empty();
  return *std::move(ours);
}

// The parts of a leaf as Redis would hold them: (block, part) -> bytes.
using Parts = std::map<std::pair<int64_t, int64_t>, std::vector<uint8_t>>;

Parts CutIntoParts(const std::vector<uint8_t>& leaf, const BlockLayout& layout) {
  Parts parts;
  for (int64_t b = 0; b < layout.block_count(); ++b) {
    for (int64_t p = 0; p < layout.part_count(b); ++p) {
      auto begin = leaf.begin() + layout.block_offset(b) + p * layout.part_bytes();
      parts[{b, p}].assign(begin, begin + layout.part_size(b, p));
    }
  }
  return parts;
}

std::vector<uint8_t> JoinParts(const Parts& parts) {
  std::vector<uint8_t> leaf;
  for (const auto& [key, bytes] : parts) leaf.insert(leaf.end(), bytes.begin(), bytes.end());
  return leaf;
}

// A random leaf over `batch`, read and written through the planned runs,
// against torch's index and index_put_ on the same bytes.
void CheckBytes(const Shape& batch, const IndexSpec& spec, const ResolvedIndex& resolved,
                CaseMaker& maker, Tally& tally) {
  const Shape elem_shape = maker.ElemShape();
  const int64_t elem_size = maker.Uniform(1, 16);
  const int64_t rows_per_block = maker.Uniform(1, 6);
  const int64_t part_bytes = maker.Uniform(1, 64);
  SCOPED_TRACE(Describe(batch, spec) + " elem " + ShapeToString(elem_shape) + " x " +
               std::to_string(elem_size) + " bytes, rows_per_block " +
               std::to_string(rows_per_block) + ", part_bytes " + std::to_string(part_bytes));

  Shape leaf_shape = batch;
  leaf_shape.insert(leaf_shape.end(), elem_shape.begin(), elem_shape.end());
  absl::StatusOr<BlockLayout> layout =
      BlockLayout::Make(batch, leaf_shape, elem_size, rows_per_block, part_bytes);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const int64_t cell_bytes = *ByteSize(elem_shape, elem_size);

  // The leaf as torch sees it: its bytes as one more dim.
  Shape byte_shape = leaf_shape;
  byte_shape.push_back(elem_size);
  const std::vector<uint8_t> leaf = maker.Bytes(layout->total_bytes());
  const at::Tensor leaf_tensor = ByteTensor(leaf, byte_shape);
  const Parts parts = CutIntoParts(leaf, *layout);
  const std::vector<PartRun> runs = SplitRuns(PlanRuns(resolved, cell_bytes), *layout);
  const int64_t result_bytes = static_cast<int64_t>(resolved.cells.size()) * cell_bytes;

  // Read: runs tile the result exactly, in order, each inside its part.
  std::vector<uint8_t> read(result_bytes);
  int64_t next = 0;
  for (const PartRun& run : runs) {
    const std::vector<uint8_t>& part = parts.at({run.block, run.part});
    ASSERT_EQ(run.result_offset, next);
    ASSERT_GT(run.length, 0);
    ASSERT_LE(run.offset_in_part + run.length, static_cast<int64_t>(part.size()));
    std::memcpy(read.data() + run.result_offset, part.data() + run.offset_in_part, run.length);
    next += run.length;
  }
  ASSERT_EQ(next, result_bytes);
  const std::vector<at::indexing::TensorIndex> torch_index =
      ToTorch(WithoutEllipsis(spec, batch.size()));
  EXPECT_EQ(read, BytesOf(leaf_tensor.index(torch_index))) << "read";

  // Write the same runs the other way.
  Shape value_shape = resolved.result_shape;
  value_shape.insert(value_shape.end(), elem_shape.begin(), elem_shape.end());
  value_shape.push_back(elem_size);
  const std::vector<uint8_t> value = maker.Bytes(result_bytes);
  Parts written = parts;
  for (const PartRun& run : runs) {
    std::memcpy(written.at({run.block, run.part}).data() + run.offset_in_part,
                value.data() + run.result_offset, run.length);
  }
  const std::vector<uint8_t> ours = JoinParts(written);

  at::Tensor expected_tensor = leaf_tensor.clone();
  try {
    expected_tensor.index_put_(torch_index, ByteTensor(value, value_shape));
  } catch (const c10::Error& e) {
    FAIL() << "index_put_ threw where index did not: " << e.what_without_backtrace();
  }
  const std::vector<uint8_t> expected = BytesOf(expected_tensor);
  ASSERT_EQ(ours.size(), expected.size());

  // Which result cells aim at each batch cell.
  std::map<int64_t, std::vector<int64_t>> writers;
  for (size_t i = 0; i < resolved.cells.size(); ++i) writers[resolved.cells[i]].push_back(i);
  bool duplicates = false;
  for (const auto& [cell, from] : writers) duplicates |= from.size() > 1;
  if (!duplicates) {
    EXPECT_EQ(ours, expected) << "write";
    return;
  }
  // With duplicate targets torch promises no order: each written cell must
  // hold one of the values aimed at it (and so must torch's), others stay.
  ++tally.duplicates;
  const int64_t cells = layout->total_bytes() / std::max<int64_t>(cell_bytes, 1);
  for (int64_t c = 0; c < cells && cell_bytes > 0; ++c) {
    auto cell_of = [&](const std::vector<uint8_t>& bytes, int64_t cell) {
      return std::vector<uint8_t>(bytes.begin() + cell * cell_bytes,
                                  bytes.begin() + (cell + 1) * cell_bytes);
    };
    auto it = writers.find(c);
    if (it == writers.end()) {
      EXPECT_EQ(cell_of(ours, c), cell_of(leaf, c)) << "untouched cell " << c;
      EXPECT_EQ(cell_of(expected, c), cell_of(leaf, c)) << "untouched cell " << c;
      continue;
    }
    bool ours_found = false, torch_found = false;
    for (int64_t i : it->second) {
      ours_found |= cell_of(ours, c) == cell_of(value, i);
      torch_found |= cell_of(expected, c) == cell_of(value, i);
    }
    EXPECT_TRUE(ours_found) << "cell " << c << " holds none of its values";
    EXPECT_TRUE(torch_found) << "cell " << c << " (torch) holds none of its values";
  }
}

// ---------------------------------------------------------------------------
// Tests

TEST(IndexTorchTest, ResolveMatchesTorchIndexing) {
  CaseMaker maker(20240601);
  Tally tally;
  for (int i = 0; i < 100000 && !HasFailure(); ++i) {
    const Shape batch = maker.Batch();
    CheckResolve(batch, maker.Spec(batch), tally);
  }
  std::cout << "ok " << tally.ok << ", out of range " << tally.out_of_range << ", invalid "
            << tally.invalid << ", empty results " << tally.empty_results << ", int with advanced "
            << tally.int_with_advanced << ", 0-d " << tally.zero_d << ", masks " << tally.masks
            << ", index dims moved first " << tally.moved_first << "\n";
  if (HasFailure()) return;  // stopped early: the tallies mean nothing
  // The generator must reach every outcome and corner often.
  EXPECT_GT(tally.ok, 50000);
  EXPECT_GT(tally.out_of_range, 5000);
  EXPECT_GT(tally.invalid, 5000);
  EXPECT_GT(tally.empty_results, 5000);
  EXPECT_GT(tally.int_with_advanced, 5000);
  EXPECT_GT(tally.zero_d, 5000);
  EXPECT_GT(tally.masks, 5000);
  EXPECT_GT(tally.moved_first, 100);
}

TEST(IndexTorchTest, ReadsAndWritesMatchTorch) {
  CaseMaker maker(77);
  Tally tally;
  int checked = 0;
  while (checked < 20000 && !HasFailure()) {
    const Shape batch = maker.Batch();
    const IndexSpec spec = maker.Spec(batch);
    std::optional<ResolvedIndex> resolved = CheckResolve(batch, spec, tally);
    if (!resolved) continue;
    CheckBytes(batch, spec, *resolved, maker, tally);
    ++checked;
  }
  if (HasFailure()) return;
  std::cout << "checked " << checked << ", with duplicate targets " << tally.duplicates << "\n";
  EXPECT_GT(tally.duplicates, 500);
}

TEST(IndexTorchTest, BroadcastBytesMatchesExpand) {
  CaseMaker maker(5);
  int rejected = 0;
  for (int i = 0; i < 20000 && !HasFailure(); ++i) {
    Shape target(maker.Uniform(0, 4));
    for (int64_t& d : target) d = maker.Uniform(0, 4);
    // Mostly a broadcastable suffix with some dims set to 1; sometimes any
    // shape, possibly with more dims than the target.
    Shape value;
    if (maker.OneIn(5)) {
      value.resize(maker.Uniform(0, 5));
      for (int64_t& d : value) d = maker.Uniform(0, 4);
    } else {
      value.assign(target.begin() + maker.Uniform(0, target.size()), target.end());
      for (int64_t& d : value) {
        if (maker.OneIn(3)) d = 1;
      }
    }
    const int64_t elem_size = maker.Uniform(1, 16);
    SCOPED_TRACE(ShapeToString(value) + " -> " + ShapeToString(target) + " x " +
                 std::to_string(elem_size));
    const std::vector<uint8_t> bytes = maker.Bytes(*ByteSize(value, elem_size));

    Shape value_bytes_shape = value, target_bytes_shape = target;
    value_bytes_shape.push_back(elem_size);
    target_bytes_shape.push_back(elem_size);
    std::optional<std::vector<uint8_t>> expected;
    try {
      expected = BytesOf(ByteTensor(bytes, value_bytes_shape).expand(target_bytes_shape));
    } catch (const c10::Error&) {
    }

    absl::StatusOr<std::string> ours =
        BroadcastBytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                       value, target, elem_size);
    if (!expected) {
      EXPECT_EQ(ours.status().code(), StatusCode::kInvalidArgument) << ours.status();
      ++rejected;
      continue;
    }
    ASSERT_TRUE(ours.ok()) << ours.status();
    EXPECT_EQ(std::vector<uint8_t>(ours->begin(), ours->end()), *expected);
  }
  if (HasFailure()) return;
  std::cout << "rejected " << rejected << "\n";
  EXPECT_GT(rejected, 2000);
}

}  // namespace
}  // namespace tdstore::plan
