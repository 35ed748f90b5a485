// The values the Store interface (store.h) takes and gives: requests and
// results of its calls, and the sink a whole-leaf read delivers into.
// Plain data, no I/O, nothing of how a store keeps its dicts.
#ifndef TDSTORE_SERVER_STORE_STORE_VALUES_H_
#define TDSTORE_SERVER_STORE_STORE_VALUES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/index.h"
#include "common/leaf_kind.h"
#include "common/path.h"
#include "common/shape.h"
#include "server/store/leaf_record.h"
#include "server/store/memory_budget.h"
#include "server/store/schema.h"
#include "server/store/shared_bytes.h"

namespace tdstore::store {

// What a store runs on, and whether its back end answers now.
struct Health {
  std::string backend;  // "standalone redis://host:port", "cluster of 3 masters ...", "memory"
  int redis_masters = 0;
  bool redis_ok = false;
};

// A dict's id and schema version, read at one moment.
struct SchemaVersionSeen {
  std::string id;
  int64_t version = 0;
};

// VersionAfter: a call's result may carry the dict's schema version, read
// at or after the call took effect, when the store could read it in the
// same step as the call's data (an in-order Redis pipeline, a Lua script,
// the memory store's lock). Every call must report such a version
// (docs/protocol.md, "Causal schema reads"); a result without one leaves
// it to the caller to read Store::SchemaVersion afterwards, one more round
// trip. So the field may be unset, never early.

// Where a new dict's leaves come from when it is made as a copy.
struct CopySource {
  DictRef dict;
  LeafPath from;  // empty: every leaf
};

// A dict to create (Store::CreateDict).
struct NewDict {
  std::string_view name;
  Shape batch_shape;
  int64_t rows_per_block = 0;  // 0: the default
  int64_t part_bytes = 0;      // 0: the default
  // kRecord: each row's leaves in one record (schema.h), formed by
  // `leaves`, or else by the first indexed write. Not for a copy.
  DictLayout layout = DictLayout::kLeaves;
  struct Leaf {
    LeafPath path;
    DType dtype = DType::kUnspecified;
    Shape element_shape;
    // A value leaf (element shape [slot], slot >= 4) starts with every
    // row empty; a one-value leaf cannot be made this way.
    LeafKind kind = LeafKind::kTensor;
  };
  std::vector<Leaf> leaves;
  std::optional<CopySource> copy_from;  // then batch_shape and leaves stay empty
};

// What a whole-leaf write (or a copy) made visible.
struct CommitResult {
  std::vector<Leaf> written;  // in the order they were written
  int64_t version = 0;        // the dict's schema version after the commit
};

// Leaves removed, and the schema version the removal made.
struct RemovedLeaves {
  std::vector<LeafPath> paths;  // sorted
  int64_t version = 0;
};

// Leaves moved by a rename, what the move replaced, and the version it made.
struct RenamedLeaves {
  std::vector<std::pair<LeafPath, LeafPath>> moved;  // before, after
  std::vector<LeafPath> replaced;
  int64_t version = 0;
};

// One leaf's fill value.
struct Fill {
  LeafPath path;
  DType dtype = DType::kUnspecified;
  std::string element;  // one element of `dtype`, little-endian
};

// A change of a dict's attributes, applied whole or not at all.
struct AttrsUpdate {
  std::map<std::string, std::string> set;
  std::vector<std::string> remove;  // absent names are no error
};

// One operation on a dict counter.
struct CounterOp {
  enum class Kind { kGet, kAdd, kCas };
  Kind kind = Kind::kGet;
  std::string name;
  int64_t delta = 0;      // kAdd
  int64_t expected = 0;   // kCas
  int64_t new_value = 0;  // kCas
};
struct CounterResult {
  int64_t value = 0;     // after the operation
  bool swapped = false;  // kCas
  // The dict's schema version read at or after the operation, when the
  // store read it in the same step (VersionAfter below); unset otherwise.
  std::optional<SchemaVersionSeen> version_after = {};
};

// A ring buffer's append: `rows` rows reserved from the counter `cursor`
// and written at (start + i) mod batch dim 0, then counted in `count`.
struct RingAppend {
  std::string cursor;  // the counter rows are reserved from
  int64_t rows = 0;
  std::string count;  // the counter of rows written; empty: none
};
struct RingAppendResult {
  std::vector<Leaf> written;  // as an indexed write returns them
  int64_t version = 0;        // the schema version written at
  int64_t start = 0;          // the cursor before the append
  int64_t count_value = 0;    // `count` afterwards (0 without one)
};

// td[index] for a set of leaves, gathered.
struct IndexedReadResult {
  Shape result_shape;  // the indexed batch shape
  struct LeafData {
    Leaf leaf;          // path and record (its full stored shape)
    Shape shape;        // at the indexed batch shape
    std::string bytes;  // C-order
  };
  std::vector<LeafData> leaves;  // in path order
  // The memory budget's share for `leaves`: keep the result until sent.
  MemoryBudget::Lease lease;
  // The dict's schema version read after the data, when the store read it
  // in the same step (VersionAfter below); unset otherwise.
  std::optional<SchemaVersionSeen> version_after = {};
};

// One value of td[index] = values.
struct IndexedWriteValue {
  LeafPath path;
  DType dtype = DType::kUnspecified;
  Shape shape;        // the value's own shape (broadcast to the target)
  std::string bytes;  // C-order, exactly ByteSize(shape, dtype)
  // Must be the leaf's. A value leaf takes rows of whole slots (the value's
  // last dim is the leaf's slot, never broadcast); a one-value leaf takes no
  // indexed write at all.
  LeafKind kind = LeafKind::kTensor;
  // A ragged leaf's cell dtype name (its record's value): must equal the
  // leaf's, and names it when the write creates the leaf. Empty otherwise.
  std::string value = {};  // "= {}": aggregate initializers may leave it out
};

// What an indexed write (or a ring append) did.
struct IndexedWriteResult {
  std::vector<Leaf> written;  // the leaves written, their records as stored
  int64_t version = 0;        // the schema version written at
  // A ring append's: the cursor before it, and the count counter after.
  int64_t ring_start = 0;
  int64_t count_value = 0;
  // The dict's schema version read after the write took effect, when the
  // store read it in the same step (VersionAfter below); unset otherwise.
  std::optional<SchemaVersionSeen> version_after = {};
};

// Where a whole-leaf read delivers. Calls come in this order: Begin once,
// then for each leaf BeginLeaf and its bytes (none for an empty leaf).
class LeafSink {
 public:
  virtual ~LeafSink() = default;
  // The schema is current and these leaves follow, in this order. An error
  // stops the read before any data moves.
  virtual absl::Status Begin(const DictSchema& schema, const std::vector<const Leaf*>& leaves) = 0;
  virtual absl::Status BeginLeaf(const Leaf& leaf) = 0;
  // Bytes of the current leaf, in order; the sink may keep them as long as
  // it holds their owner.
  virtual absl::Status Data(SharedBytes bytes) = 0;
};

// What a schema watcher is told (Store::Watch).
using SchemaListener = std::function<void(const absl::StatusOr<DictSchema>&)>;

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_STORE_VALUES_H_
