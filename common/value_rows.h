// The slots of a value leaf (common/leaf_kind.h): one per batch cell, each
// `slot` bytes: a 4-byte little-endian length L, then the L bytes of the
// value, then zeros up to the slot's end. A slot of all zeros is a row never
// written (a new row, or one a resize added); a written empty value stores
// kEmptyValueLength as its length, so the two read apart (tensordict reads
// the first as None and the second as "").
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_VALUE_ROWS_H_
#define TDSTORE_COMMON_VALUE_ROWS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tdstore {

// The largest value one slot may hold: 16 MiB. A row of a leaf is read and
// written with the rows of every other leaf, so a value this big already
// makes every sample of its dict slow; bigger ones belong in a tensor leaf.
inline constexpr int64_t kMaxValueBytes = int64_t{16} << 20;

// The length word of a written empty value (no value can be 2 GiB: see
// kMaxValueBytes). Slots written before this word existed hold 0 for an
// empty value, and now read as never written.
inline constexpr uint32_t kEmptyValueLength = 0x80000000u;

// The slot size a value leaf gets when its longest value is `longest`
// bytes: the next power of two that holds it and its length, at least 16.
// Powers of two leave room for longer values written later into rows.
// INVALID_ARGUMENT past kMaxValueBytes.
absl::StatusOr<int64_t> ValueSlotBytes(int64_t longest);

// `values` as consecutive slots of `slot` bytes into `out`, which must hold
// values.size() * slot bytes. INVALID_ARGUMENT (naming the first value that
// does not fit and its position) if one is longer than slot - 4; nothing
// is then written.
absl::Status EncodeValueRows(const std::vector<std::string_view>& values, int64_t slot,
                             char* out);

// The `count` values in `count` consecutive slots at `data`; a row never
// written reads empty, and `written` (when given) says which rows were.
// DATA_LOSS (naming the row) for a slot whose length runs past its end: the
// leaf holds bytes no tdstore client wrote.
absl::StatusOr<std::vector<std::string_view>> DecodeValueRows(const char* data, int64_t count,
                                                              int64_t slot,
                                                              std::vector<bool>* written = nullptr);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_VALUE_ROWS_H_
