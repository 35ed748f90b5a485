// The checks and refusals every store makes, and words, the same way: a
// client sees one message for one rule whatever store serves it.
//
// Pure: no I/O. Thread-safe.
#ifndef TDSTORE_SERVER_STORE_STORE_CHECKS_H_
#define TDSTORE_SERVER_STORE_STORE_CHECKS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/store/schema.h"
#include "server/store/store_options.h"
#include "server/store/store_values.h"

namespace tdstore::store {

// A new dict's name, batch shape, layout and block layout: INVALID_ARGUMENT
// for any that is wrong. Sets a rows_per_block or part_bytes of 0 to the
// options' default.
absl::Status CheckNewDict(const StoreOptions& options, std::string_view name,
                          const Shape& batch_shape, DictLayout layout, int64_t* rows_per_block,
                          int64_t* part_bytes);

// FAILED_PRECONDITION if `replaced` (the leaf at `path` now, or null) is a
// leaf of its dict's shared record: a record leaf is written by rows, never
// whole, for replacing it would retire the generation every other leaf of
// the record still reads.
absl::Status CheckNotRecordLeaf(const DictSchema& schema, const LeafPath& path,
                                const Leaf* replaced);

// A whole-leaf write's header: the leaf fits the dict (CheckNewLeaf) and
// `byte_size`, the bytes the stream announces, is what its dtype and shape
// hold. INVALID_ARGUMENT naming the leaf otherwise.
absl::Status CheckLeafHeader(const Shape& batch_shape, const LeafPath& path,
                             const LeafRecord& leaf, int64_t byte_size);

// True if `a` and `b` are one leaf's schema: dtype, shape, kind, and a
// ragged leaf's cell dtype. What a locked dict keeps.
bool SameLeafSchema(const LeafRecord& a, const LeafRecord& b);

// FAILED_PRECONDITION if the dict is locked and a whole-leaf write of
// `leaf` at `path` would change it: add a leaf, or give `replaced` (the
// leaf there now, or null) another dtype, shape, kind or ragged cell
// dtype; with `refuse_if_locked` (tensordict's td["k"] = v on a locked
// TensorDict), any write of the leaf at all.
absl::Status CheckLockedLeafWrite(const DictSchema& schema, const LeafPath& path,
                                  const Leaf* replaced, const LeafRecord& leaf,
                                  bool refuse_if_locked);

// NOT_FOUND for a ref that names no dict (naming its id when it has one).
absl::Status DictNotFound(const DictRef& ref);

// FAILED_PRECONDITION for a change a locked dict refuses; `what` says which
// ("add leaf 'obs'", "delete leaves").
absl::Status LockedError(std::string_view dict, std::string_view what);

// INVALID_ARGUMENT unless `name` is 1..kMaxAttrNameBytes bytes: the rule
// for attribute and counter names; `kind` ("counter") names it.
absl::Status CheckStateName(std::string_view kind, std::string_view name);

// An attribute update's names and values within common/protocol_limits.h,
// no name both set and removed (INVALID_ARGUMENT), and no more set than a
// dict may hold (RESOURCE_EXHAUSTED). The count after it is the store's.
absl::Status CheckAttrsUpdate(const AttrsUpdate& update);
// RESOURCE_EXHAUSTED: the update would leave `count` attributes.
absl::Status TooManyAttrs(std::string_view dict, int64_t count);
// RESOURCE_EXHAUSTED: a new counter past the dict's `count`.
absl::Status TooManyCounters(std::string_view dict, int64_t count, std::string_view name);
// OUT_OF_RANGE: counter `name` + `delta` leaves int64.
absl::Status CounterOverflow(std::string_view name, int64_t delta);
// INVALID_ARGUMENT: a ring append of `rows` rows into a ring of `size`.
absl::Status RingSizeError(std::string_view dict, int64_t size, int64_t rows);

// Each fill names an existing tensor leaf of the dtype the caller believes,
// by a well-formed element (store.h's FillLeaves).
absl::Status CheckFills(const DictSchema& schema, const std::vector<Fill>& fills);

// RESOURCE_EXHAUSTED naming --dict-quota-bytes if the dict would hold
// `bytes_after` bytes.
absl::Status CheckDictQuota(const StoreOptions& options, const DictMeta& meta,
                            int64_t bytes_after);
// RESOURCE_EXHAUSTED naming --namespace-quota-bytes: `what` needs `bytes`
// with `used` stored.
absl::Status NamespaceQuotaError(const StoreOptions& options, int64_t used, int64_t bytes,
                                 std::string_view what);
// RESOURCE_EXHAUSTED naming --max-dicts: the namespace holds `count`.
absl::Status MaxDictsError(const StoreOptions& options, int64_t count);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_STORE_CHECKS_H_
