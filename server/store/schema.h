// What tdstored knows about one dict: its meta and its leaves, as a store
// read them, plus the pure queries the service answers from them.
//
// A DictSchema is a snapshot: it may be stale the moment it is read (another
// daemon may change the dict). Writers are protected by the commit script,
// readers detect a replaced generation by a short read (see leaf_reader.h).
//
// Value type; safe to copy and share read-only between threads.
#ifndef TDSTORE_SERVER_STORE_SCHEMA_H_
#define TDSTORE_SERVER_STORE_SCHEMA_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/block_layout.h"
#include "common/dtype.h"
#include "common/key_listing.h"
#include "common/path.h"
#include "server/store/leaf_record.h"
#include "common/shape.h"

namespace tdstore::store {

// How a request names a dict (the proto's "Dict ids"): its name, and the id
// the client opened, if it did. Views: the request owns the strings.
struct DictRef {
  DictRef(std::string_view name, std::string_view id) : name(name), id(id) {}
  // By name alone (tools and tests).
  DictRef(std::string_view name) : name(name) {}  // NOLINT: implicit
  DictRef(const char* name) : name(name) {}       // NOLINT: implicit
  DictRef(const std::string& name) : name(name) {}  // NOLINT: implicit

  std::string_view name;
  std::string_view id;  // empty: whichever dict has the name now
};

// How a dict's leaves keep their rows (docs/storage-layout.md).
enum class DictLayout {
  // Each leaf's rows in blocks of its own (the default).
  kLeaves,
  // Every leaf with row bytes in one shared record per row: a row's leaves
  // are contiguous, so reading or writing every leaf of a row is one range.
  // The record is formed by the dict's first leaves and fixed after that.
  kRecord,
};
// "leaves" / "record".
std::string_view DictLayoutName(DictLayout layout);

struct DictMeta {
  std::string id;
  std::string name;
  Shape batch_shape;
  int64_t rows_per_block = 0;
  int64_t part_bytes = 0;
  int64_t version = 0;
  // Set while the dict is being deleted (writers refuse it).
  bool deleting = false;
  // Locked: its leaves keep their paths, dtypes and shapes (set_locked.lua).
  bool locked = false;
  // The most rows batch dim 0 has had or was being given by a resize
  // (resize_dict.lua); 0 if never resized. Blocks up to it may exist.
  int64_t rows_high = 0;
  DictLayout layout = DictLayout::kLeaves;
};

// One stored leaf: its path and its current record.
struct Leaf {
  LeafPath path;
  LeafRecord record;
};

struct DictSchema {
  DictMeta meta;
  // Keyed by encoded path (common/path.h), so iteration order is the order
  // of encoded paths: a subtree's leaves are contiguous.
  std::map<std::string, Leaf> leaves;
  // User attributes (name -> value), read with the schema.
  std::map<std::string, std::string> attrs;

  // Bytes the dict's generations store (its quota counts this): every
  // leaf's own bytes, and each shared record once.
  int64_t StoredBytes() const;

  // A record dict's leaves that live in its record (none if not formed yet).
  std::vector<const Leaf*> RecordLeaves() const;

  // The block layout of a leaf with this record in this dict.
  absl::StatusOr<BlockLayout> Layout(const LeafRecord& record) const;

  // The leaf at exactly `path`, or nullptr.
  const Leaf* Find(const LeafPath& path) const;

  // Every leaf equal to or under `prefix`, in path order. Empty if none.
  std::vector<const Leaf*> Under(const LeafPath& prefix) const;

  // The leaves a read names: every leaf when `paths` is empty, else every
  // leaf equal to or under each path, once each, in path order. NOT_FOUND
  // naming the first path that matches nothing.
  absl::StatusOr<std::vector<const Leaf*>> Select(const std::vector<LeafPath>& paths) const;

  // Every leaf's path, in path order.
  std::vector<LeafPath> LeafPaths() const;

  // common/key_listing.h's rules over LeafPaths().
  using PathKind = tdstore::PathKind;
  PathKind Classify(const LeafPath& path) const;
  std::vector<LeafPath> Keys(bool include_nested, bool leaves_only) const;
};


// --- The one check of a new leaf ---------------------------------------------
// Every way a leaf comes to be (a whole-leaf write, a dict created with a
// schema, an indexed write into a missing leaf) runs these, and only these.

// A valid path, a known dtype, a valid full shape whose leading dims are
// `batch_shape`, and a kind (and one value) that fit them (CheckLeafKind in
// common/leaf_kind_check.h). `leaf`'s generation is ignored. Returns the leaf's
// byte size; INVALID_ARGUMENT naming the leaf otherwise.
absl::StatusOr<int64_t> CheckNewLeaf(const Shape& batch_shape, const LeafPath& path,
                                     const LeafRecord& leaf);
// The same for a tensor leaf.
absl::StatusOr<int64_t> CheckNewLeaf(const Shape& batch_shape, const LeafPath& path, DType dtype,
                                     const Shape& shape);
// Two leaves of one request: INVALID_ARGUMENT if they are the same path or
// one would be nested in the other.
absl::Status CheckDisjoint(const LeafPath& a, const LeafPath& b);
// FAILED_PRECONDITION if `path` would be nested in, or hold, a leaf of
// `schema` other than itself (a path cannot be both a leaf and a sub-dict).
// Early and friendly: commit_leaves.lua re-checks atomically at commit.
absl::Status CheckNesting(const DictSchema& schema, const LeafPath& path);

// Bytes of a leaf with this record (0 if its shape overflows, which a
// stored record never does).
int64_t RecordBytes(const LeafRecord& record);
// Bytes of one index of batch dim 0 of a leaf with this record (0 for a
// leaf with no batch dims or an empty element). A record dict keeps the
// leaves with row bytes in its record.
int64_t RowBytes(const LeafRecord& record);
// Bytes the generation of this record stores: RecordBytes, or the whole
// shared record for a leaf of one. What a deleted generation gives back.
int64_t GenerationBytes(const LeafRecord& record);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_STORE_SCHEMA_H_
