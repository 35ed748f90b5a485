// The one check of a leaf's kind against its dtype, shape and one value
// (common/leaf_kind.h says what the forms are). The server runs it on every
// leaf it creates (CheckNewLeaf in server/store/schema.h).
//
// Pure code, no I/O. Safe to call from any thread.
#ifndef TDSTORE_COMMON_LEAF_KIND_CHECK_H_
#define TDSTORE_COMMON_LEAF_KIND_CHECK_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "common/leaf_kind.h"
#include "common/shape.h"

namespace tdstore {

// OK if a leaf of this kind may have this dtype, full shape and one value
// in a dict of `batch_dims` batch dims: a tensor leaf any dtype and shape
// and no value; a value leaf uint8 with exactly one element dim, the slot,
// either 0 (then `one_value` holds at most kMaxOneValueBytes) or at least
// kValueLengthBytes (then `one_value` is empty); a ragged leaf has at least
// one batch dim, a slot of at least kValueLengthBytes, and `one_value`
// names its cells' dtype. INVALID_ARGUMENT (naming the rule) otherwise.
absl::Status CheckLeafKind(LeafKind kind, DType dtype, const Shape& shape, size_t batch_dims,
                           std::string_view one_value);

}  // namespace tdstore

#endif  // TDSTORE_COMMON_LEAF_KIND_CHECK_H_
