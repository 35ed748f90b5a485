// What a leaf holds: a tensor, or one non-tensor value per batch cell.
//
// A value leaf ("text", "json" or "bytes") has dtype uint8 and shape
// batch_shape + [slot], and comes in two forms:
//  - slot >= 4: one value per batch cell (tensordict's NonTensorStack),
//    stored exactly like a uint8 tensor leaf. Each cell owns one fixed slot
//    of `slot` bytes: a 4-byte little-endian length, then that many bytes of
//    the value, zero-padded (common/value_rows.h). So a value row lives in
//    the same storage block as the tensor rows of the same cell and is read
//    and written in the same atomic block call: a sampled row's label always
//    belongs to that row.
//  - slot == 0: one value for the whole dict or sub-dict (NonTensorData). It
//    has no bytes and no blocks; the value (at most kMaxOneValueBytes) lives
//    in the leaf record, so it travels with the schema.
// tdstored keeps the kind in the leaf record and refuses to mix kinds; the
// slot contents are the clients' to encode and check.
//
// Installed with the client headers (core.h includes it), so it depends on
// the standard library only; the server's check of a leaf's form is
// common/leaf_kind_check.h.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_LEAF_KIND_H_
#define TDSTORE_COMMON_LEAF_KIND_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tdstore {

// The numbers equal proto tdstore.v1.LeafKind.
enum class LeafKind : int {
  kTensor = 0,
  kText = 1,   // UTF-8 text
  kJson = 2,   // UTF-8 JSON text
  kBytes = 3,  // raw bytes
  // One tensor per batch cell, each of its own shape (common/ragged_cells.h).
  // Stored as slots like the value kinds, never in the one-value form; the
  // record's value names the cells' dtype.
  kRagged = 4,
};

bool IsKnownLeafKind(int number);

// "tensor", "text", "json", "bytes", "ragged": the record and CLI spelling.
std::string_view LeafKindName(LeafKind kind);
std::optional<LeafKind> LeafKindFromName(std::string_view name);

// Bytes of a slot's length prefix.
inline constexpr int64_t kValueLengthBytes = 4;

// The largest one value (slot 0) a leaf record may hold: 64 KiB. It is
// read with the schema by every call that loads it.
inline constexpr int64_t kMaxOneValueBytes = int64_t{64} << 10;

// The most bytes the one values of all of a dict's leaves may add up to:
// 1 MiB. Every describe, schema event and read header carries them.
inline constexpr int64_t kMaxOneValueBytesPerDict = int64_t{1} << 20;

// True for a value leaf of the one-value form (full shape ending in 0).
bool IsOneValue(LeafKind kind, const std::vector<int64_t>& shape);

// True if the leaf record keeps a value: a one-value leaf's value, or a
// ragged leaf's dtype name.
bool KeepsValue(LeafKind kind, const std::vector<int64_t>& shape);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_LEAF_KIND_H_
