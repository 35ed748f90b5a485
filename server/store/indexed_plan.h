// The pure half of indexed reads and writes, shared by every store: sizes
// of a leaf's cells, the limits of one indexed call, and the plan of
// td[index] = values (each value checked against the schema and broadcast
// to its target). No I/O: a store moves the bytes its own way.
//
// Thread-safe (pure functions).
#ifndef TDSTORE_SERVER_STORE_INDEXED_PLAN_H_
#define TDSTORE_SERVER_STORE_INDEXED_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/index.h"
#include "server/store/memory_budget.h"
#include "server/store/schema.h"
#include "server/store/store_values.h"

namespace tdstore::store {

// Bytes one cell (one index of every batch dim) of this leaf occupies.
int64_t CellBytes(const DictSchema& schema, const LeafRecord& record);

// The leaf's shape at an indexed batch shape: result_shape + element shape.
Shape IndexedShape(const DictSchema& schema, const LeafRecord& record,
                   const Shape& result_shape);

// RESOURCE_EXHAUSTED if an indexed call would select more than `max_bytes`.
absl::Status CheckIndexedSize(int64_t max_bytes, int64_t bytes);

// The most cells an index may resolve to: the planner keeps 8 bytes per
// cell, bounded by the same limit as the selected data.
inline int64_t MaxIndexCells(int64_t max_indexed_bytes) { return max_indexed_bytes / 8; }

// What a resolved index occupies while a call uses it: its cells, and the
// byte runs planned from them (about as many).
int64_t IndexMemory(const plan::ResolvedIndex& resolved);

// What the first value of an indexed write leases beyond its copies: an
// allowance for the resolved index.
inline constexpr int64_t kIndexAllowance = 1 << 20;

// A leaf an indexed write (or a dict's schema) creates zero-filled.
struct ZeroLeaf {
  LeafPath path;
  DType dtype = DType::kUnspecified;
  Shape shape;  // full shape, batch dims first
  LeafKind kind = LeafKind::kTensor;
  std::string value = {};  // a ragged leaf's cell dtype name; empty otherwise
};

// A value checked against the current schema and expanded to its target.
struct PlannedValue {
  const Leaf* leaf = nullptr;      // null: the leaf must be created first
  std::optional<ZeroLeaf> create;  // set when leaf is null
  // The value at the indexed shape, C-order: the received bytes themselves
  // when they need no broadcasting (no copy), else `expanded`.
  std::string_view received;
  std::string expanded;
  bool broadcast = false;
  std::string_view bytes() const { return broadcast ? std::string_view(expanded) : received; }
};

// Checks every value against `schema` (paths, dtypes, kinds, shapes, the
// selection limit `max_bytes`) and broadcasts it to td[index]'s shape. Before
// expanding, grows `lease` to what the values, the index and `copies` more
// copies of the selection need. Errors: INVALID_ARGUMENT,
// FAILED_PRECONDITION (a new leaf's path nests with another),
// RESOURCE_EXHAUSTED. The plan points into `schema` and `values`.
absl::StatusOr<std::vector<PlannedValue>> PlanValues(const DictSchema& schema,
                                                     const plan::ResolvedIndex& resolved,
                                                     const std::vector<IndexedWriteValue>& values,
                                                     int64_t max_bytes, int64_t copies,
                                                     MemoryBudget::Lease& lease);

// The rows a ring reservation of `rows` from `start` covers, as an index
// over batch dim 0 of `size` rows: one slice when they do not wrap, else
// their positions. A negative cursor still names rows (mod the size).
plan::IndexSpec RingRows(int64_t start, int64_t rows, int64_t size);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_INDEXED_PLAN_H_
