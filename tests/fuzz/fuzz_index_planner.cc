// libFuzzer target: the index planner (common/index.h) from index text
// (the CLI's parser, client/cli/index_text.h) to part runs, plus
// BroadcastBytes.
//
// Input layout: an 11-byte header, then the index text. A header byte b
// stands for the digit d = (uint8_t)(b - '0'), so seeds written with digits
// read naturally (make_corpus.py writes them); short inputs are padded
// with '0'.
//   byte 0      batch rank: d % 5
//   bytes 1..4  batch dims (the first `rank` are used): d % 8, or, when b
//               has its high bit set, a huge dim (2^20, 2^31, 2^40 or 2^62)
//               so the overflow and cap paths are reached too
//   byte 5      element dim e: d % 8 (leaf shape = batch + [e])
//   byte 6      element size: 1 + d % 8
//   byte 7      rows_per_block: 1 + d % 8
//   byte 8      part_bytes: 1 + d % 64
//   byte 9      broadcast: bit j of d makes dim j of the value 1
//   byte 10     broadcast: d % 4 == 1 drops the value's first dim, 2 grows
//               its last dim by one, 3 adds a leading dim of 2
//   bytes 11..  the index text, as the CLI's --index takes it
// E.g. "24500331700" + "1:5:2": batch [4, 5], leaf [4, 5, 3] of 4-byte
// elements, 2 rows per block, 8-byte parts, index 1:5:2.
//
// Every step's result is checked against invariants that must hold for any
// input; a violation aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/cli/index_text.h"
#include "common/block_layout.h"
#include "common/index.h"
#include "common/shape.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using tdstore::BlockLayout;
using tdstore::Shape;
using tdstore::cli::ParseIndexText;
using namespace tdstore::plan;

// Caps keep one run fast (milliseconds at worst) whatever the input.
constexpr int64_t kMaxCells = 1 << 16;
constexpr int64_t kMaxBroadcastBytes = 1 << 16;
constexpr int64_t kMaxPartRuns = 1 << 16;
constexpr size_t kHeaderBytes = 11;

int64_t Dim(uint8_t raw, uint8_t digit) {
  constexpr int64_t kHuge[] = {int64_t{1} << 20, int64_t{1} << 31, int64_t{1} << 40,
                               int64_t{1} << 62};
  return (raw & 0x80) ? kHuge[raw % 4] : digit % 8;
}

void CheckResolved(const ResolvedIndex& r, const Shape& batch, int64_t cap) {
  const int64_t numel = Numel(r.result_shape);
  CHECK(numel >= 0 && numel <= cap);
  for (int64_t d : r.result_shape) CHECK(d >= 0);
  // An empty result has no cells; otherwise one per result cell.
  CHECK(static_cast<int64_t>(r.cells.size()) == numel);
  const int64_t batch_numel = Numel(batch);
  for (int64_t cell : r.cells) CHECK(cell >= 0 && cell < batch_numel);
}

// Runs must be the cells, in result order, coalesced as far as possible.
void CheckRuns(const std::vector<ByteRun>& runs, const ResolvedIndex& r, int64_t cell_bytes) {
  if (cell_bytes == 0) {
    CHECK(runs.empty());
    return;
  }
  size_t cell = 0;
  int64_t result_offset = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const ByteRun& run = runs[i];
    CHECK(run.length > 0 && run.length % cell_bytes == 0);
    CHECK(run.result_offset == result_offset);
    for (int64_t at = 0; at < run.length; at += cell_bytes) {
      CHECK(cell < r.cells.size());
      CHECK(run.leaf_offset + at == r.cells[cell] * cell_bytes);
      ++cell;
    }
    if (i > 0) CHECK(runs[i - 1].leaf_offset + runs[i - 1].length != run.leaf_offset);
    result_offset += run.length;
  }
  CHECK(cell == r.cells.size());
}

// Part runs must tile the byte runs exactly, each inside one existing part.
void CheckPartRuns(const std::vector<PartRun>& parts, const std::vector<ByteRun>& runs,
                   const BlockLayout& layout) {
  size_t p = 0;
  for (const ByteRun& run : runs) {
    CHECK(run.leaf_offset >= 0 && run.leaf_offset + run.length <= layout.total_bytes());
    for (int64_t done = 0; done < run.length;) {
      CHECK(p < parts.size());
      const PartRun& part = parts[p++];
      CHECK(part.length > 0);
      CHECK(part.block >= 0 && part.block < layout.block_count());
      CHECK(part.part >= 0 && part.part < layout.part_count(part.block));
      CHECK(part.offset_in_part >= 0 &&
            part.offset_in_part + part.length <= layout.part_size(part.block, part.part));
      CHECK(part.result_offset == run.result_offset + done);
      CHECK(layout.block_offset(part.block) + part.part * layout.part_bytes() +
                part.offset_in_part ==
            run.leaf_offset + done);
      done += part.length;
      CHECK(done <= run.length);
    }
  }
  CHECK(p == parts.size());
}

// BroadcastBytes against a naive expand, element by element.
void CheckBroadcast(const Shape& target, const uint8_t* header, int64_t elem_size) {
  const int64_t target_numel = Numel(target);
  if (target_numel < 0 || target_numel > kMaxBroadcastBytes / elem_size) return;

  Shape value = target;
  for (size_t j = 0; j < value.size() && j < 8; ++j) {
    if (header[9] & (1u << j)) value[j] = 1;
  }
  switch (header[10] % 4) {
    case 1:
      if (!value.empty()) value.erase(value.begin());
      break;
    case 2:
      if (!value.empty()) ++value.back();
      break;
    case 3:
      value.insert(value.begin(), 2);
      break;
  }
  const int64_t value_numel = Numel(value);
  if (value_numel < 0 || value_numel > kMaxBroadcastBytes / elem_size) return;

  // Broadcastable iff the value has no more dims and each of its dims,
  // aligned right, is 1 or the target's.
  bool broadcastable = value.size() <= target.size();
  for (size_t j = 0; broadcastable && j < value.size(); ++j) {
    const int64_t v = value[value.size() - 1 - j], t = target[target.size() - 1 - j];
    broadcastable = v == 1 || v == t;
  }

  std::string bytes(value_numel * elem_size, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 37 + 11);
  auto out = BroadcastBytes(bytes, value, target, elem_size);
  CHECK(out.ok() == broadcastable);
  if (!out.ok()) return;
  CHECK(static_cast<int64_t>(out->size()) == target_numel * elem_size);

  // Walk the target in C order, tracking the value element each cell reads.
  const size_t lead = target.size() - value.size();
  std::vector<int64_t> counter(target.size(), 0);
  for (int64_t cell = 0; cell < target_numel; ++cell) {
    int64_t from = 0;
    for (size_t j = 0; j < value.size(); ++j) {
      from = from * value[j] + (value[j] == 1 ? 0 : counter[lead + j]);
    }
    CHECK(std::string_view(out->data() + cell * elem_size, elem_size) ==
          std::string_view(bytes.data() + from * elem_size, elem_size));
    for (size_t j = target.size(); j-- > 0;) {
      if (++counter[j] < target[j]) break;
      counter[j] = 0;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t raw[kHeaderBytes], header[kHeaderBytes];
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    raw[i] = i < size ? data[i] : '0';
    header[i] = static_cast<uint8_t>(raw[i] - '0');
  }
  const std::string_view text =
      size > kHeaderBytes
          ? std::string_view(reinterpret_cast<const char*>(data) + kHeaderBytes, size - kHeaderBytes)
          : std::string_view();

  Shape batch;
  for (int i = 0; i < header[0] % 5; ++i) batch.push_back(Dim(raw[1 + i], header[1 + i]));
  const int64_t element = header[5] % 8;
  const int64_t elem_size = 1 + header[6] % 8;
  const int64_t rows_per_block = 1 + header[7] % 8;
  const int64_t part_bytes = 1 + header[8] % 64;

  auto spec = ParseIndexText(text);
  if (!spec.ok()) return 0;

  auto resolved = ResolveIndex(*spec, batch, kMaxCells);
  if (!resolved.ok()) return 0;
  CheckResolved(*resolved, batch, kMaxCells);

  // The cap is checked before anything else is allocated: one cell fewer
  // must be refused.
  const int64_t numel = Numel(resolved->result_shape);
  if (numel > 0) {
    auto capped = ResolveIndex(*spec, batch, numel - 1);
    CHECK(!capped.ok() && capped.status().code() == absl::StatusCode::kResourceExhausted);
  }

  Shape leaf = batch;
  leaf.push_back(element);
  auto layout = BlockLayout::Make(batch, leaf, elem_size, rows_per_block, part_bytes);
  if (layout.ok()) {
    const int64_t cell_bytes = element * elem_size;
    const std::vector<ByteRun> runs = PlanRuns(*resolved, cell_bytes);
    CheckRuns(runs, *resolved, cell_bytes);
    // Tiny parts cut a big selection into millions of pieces; that checks
    // nothing new and would make the run slow.
    const int64_t pieces = numel * cell_bytes / part_bytes + static_cast<int64_t>(runs.size());
    if (pieces <= kMaxPartRuns) CheckPartRuns(SplitRuns(runs, *layout), runs, *layout);
  }

  Shape target = resolved->result_shape;
  target.push_back(element);
  CheckBroadcast(target, header, elem_size);
  return 0;
}
