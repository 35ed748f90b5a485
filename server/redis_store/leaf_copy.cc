#include "server/redis_store/leaf_copy.h"

#include <memory>

#include "common/str_cat.h"
#include "server/redis_store/leaf_reader.h"

namespace tdstore::store {

namespace {

// Feeds what a whole-leaf read delivers into a write transaction, each
// leaf under its new path.
class CopySink final : public LeafSink {
 public:
  CopySink(WriteTxn& txn, const LeafPath& from, const LeafPath& to)
      : txn_(txn), from_(from), to_(to) {}

  absl::Status Begin(const DictSchema& schema, const std::vector<const Leaf*>& leaves) override {
    if (leaves.empty()) {
      return absl::NotFoundError(StrCat("dict '", schema.meta.name, "' has no leaf to copy"));
    }
    return absl::OkStatus();
  }
  absl::Status BeginLeaf(const Leaf& leaf) override {
    LeafPath target = to_;
    target.insert(target.end(), leaf.path.begin() + static_cast<std::ptrdiff_t>(from_.size()),
                  leaf.path.end());
    if (target.empty()) {
      return absl::InvalidArgumentError(
          StrCat("leaf '", PathToDisplay(leaf.path), "' needs a target path to be copied to"));
    }
    // The record as it is (kind and one value included) at a new generation.
    return txn_.BeginLeaf(target, leaf.record, RecordBytes(leaf.record));
  }
  absl::Status Data(SharedBytes bytes) override { return txn_.Append(bytes.bytes); }

 private:
  WriteTxn& txn_;
  const LeafPath& from_;
  const LeafPath& to_;
};

absl::Status CheckPaths(const LeafPath& from, const LeafPath& to) {
  if (!from.empty()) {
    if (auto s = ValidatePath(from); !s.ok()) return s;
  }
  if (!to.empty()) {
    if (auto s = ValidatePath(to); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Reads the source leaves into `txn` and commits it.
absl::StatusOr<CommitResult> Copy(DictStore& dicts, const DictRef& src, const LeafPath& from,
                                  WriteTxn& txn, const LeafPath& to) {
  CopySink sink(txn, from, to);
  const std::vector<LeafPath> paths = from.empty() ? std::vector<LeafPath>{}
                                                   : std::vector<LeafPath>{from};
  // The source schema read fresh, not served from the cache: an attempt
  // made again on a newer schema (DictStore::WithSchema) would find the
  // transaction already fed, or failed.
  auto schema = dicts.Load(src);
  if (!schema.ok()) return schema.status();
  auto selected = schema->Select(paths);
  if (!selected.ok()) return selected.status();
  absl::Status read = ReadLeaves(dicts, *schema, *selected, /*probe=*/false, sink);
  if (!read.ok()) return read;  // the transaction aborts: nothing visible
  return txn.Commit();
}

}  // namespace

absl::StatusOr<CommitResult> CopyLeaves(DictStore& dicts, const DictRef& src,
                                        const LeafPath& from, const DictRef& dst,
                                        const LeafPath& to) {
  if (auto s = CheckPaths(from, to); !s.ok()) return s;
  auto txn = WriteTxn::Begin(&dicts, dst);
  if (!txn.ok()) return txn.status();
  return Copy(dicts, src, from, **txn, to);
}

absl::StatusOr<CommitResult> CopyLeavesInto(DictStore& dicts, const DictRef& src,
                                            const LeafPath& from, DictSchema dst,
                                            const LeafPath& to) {
  if (auto s = CheckPaths(from, to); !s.ok()) return s;
  std::unique_ptr<WriteTxn> txn = WriteTxn::Begin(&dicts, std::move(dst));
  return Copy(dicts, src, from, *txn, to);
}

}  // namespace tdstore::store
