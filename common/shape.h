// Shapes: validation and overflow-checked sizes.
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_SHAPE_H_
#define TDSTORE_COMMON_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tdstore {

using Shape = std::vector<int64_t>;

// Most dimensions a shape may have (torch allows 64 too).
inline constexpr int kMaxRank = 64;

// "[100, 4]"; "[]" for a 0-d shape.
std::string ShapeToString(absl::Span<const int64_t> shape);

// OK when rank <= kMaxRank and every dim >= 0; INVALID_ARGUMENT naming `what`
// otherwise.
absl::Status ValidateShape(absl::Span<const int64_t> shape, std::string_view what);

// Product of dims times elem_size. INVALID_ARGUMENT if it overflows int64.
// The shape must already be valid. An empty shape has one element.
absl::StatusOr<int64_t> ByteSize(absl::Span<const int64_t> shape, int64_t elem_size);

// True if `shape` begins with `prefix`.
bool HasPrefix(absl::Span<const int64_t> shape, absl::Span<const int64_t> prefix);

// "100,4" <-> {100, 4}; "" <-> {}. Used by Redis records and the CLI.
std::string ShapeToCsv(absl::Span<const int64_t> shape);
absl::StatusOr<Shape> ShapeFromCsv(std::string_view csv);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_SHAPE_H_
