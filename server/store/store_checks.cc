#include "server/store/store_checks.h"

#include <set>
#include <string>

#include "common/protocol_limits.h"
#include "common/str_cat.h"

namespace tdstore::store {

namespace {
}  // namespace

absl::Status DictNotFound(const DictRef& ref) {
  if (ref.id.empty()) return absl::NotFoundError(StrCat("dict '", ref.name, "' does not exist"));
  return absl::NotFoundError(StrCat("dict '", ref.name, "' (id ", ref.id,
                                    ") does not exist: it was deleted, renamed or replaced by "
                                    "a namesake since it was opened"));
}

absl::Status LockedError(std::string_view dict, std::string_view what) {
  return absl::FailedPreconditionError(
      StrCat("dict '", dict, "' is locked: cannot ", what,
             " (writes into its existing leaves are allowed; unlock it to change its leaves)"));
}

absl::Status CheckStateName(std::string_view kind, std::string_view name) {
  if (name.empty() || name.size() > static_cast<size_t>(kMaxAttrNameBytes)) {
    return absl::InvalidArgumentError(StrCat(kind, " names are 1 to ", kMaxAttrNameBytes,
                                             " bytes; got ", name.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckAttrsUpdate(const AttrsUpdate& update) {
  if (update.set.size() > static_cast<size_t>(kMaxAttrs)) {
    return absl::ResourceExhaustedError(
        StrCat("a dict holds at most ", kMaxAttrs, " attributes; ", update.set.size(), " given"));
  }
  for (const auto& [name, value] : update.set) {
    if (auto s = CheckStateName("attribute", name); !s.ok()) return s;
    if (value.size() > static_cast<size_t>(kMaxAttrValueBytes)) {
      return absl::InvalidArgumentError(StrCat("attribute '", name, "': values are at most ",
                                               kMaxAttrValueBytes, " bytes; got ",
                                               value.size()));
    }
  }
  for (const std::string& name : update.remove) {
    if (auto s = CheckStateName("attribute", name); !s.ok()) return s;
    if (update.set.count(name) != 0) {
      return absl::InvalidArgumentError(
          StrCat("attribute '", name, "' is both set and removed in one update"));
    }
  }
  return absl::OkStatus();
}

absl::Status TooManyAttrs(std::string_view dict, int64_t count) {
  return absl::ResourceExhaustedError(StrCat("dict '", dict, "' would hold ", count,
                                             " attributes, more than ", kMaxAttrs,
                                             "; nothing changed"));
}

absl::Status TooManyCounters(std::string_view dict, int64_t count, std::string_view name) {
  return absl::ResourceExhaustedError(StrCat("dict '", dict, "' already holds ", count,
                                             " counters, the most it may (", kMaxCounters,
                                             "); counter '", name, "' was not created"));
}

absl::Status CounterOverflow(std::string_view name, int64_t delta) {
  return absl::OutOfRangeError(
      StrCat("counter '", name, "' + ", delta, " would overflow int64; it was not changed"));
}

absl::Status RingSizeError(std::string_view dict, int64_t size, int64_t rows) {
  return absl::InvalidArgumentError(StrCat("a ring append of dict '", dict, "' takes 1 to ",
                                           size, " rows (its batch dim 0); got ", rows));
}

absl::Status CheckFills(const DictSchema& schema, const std::vector<Fill>& fills) {
  if (fills.empty()) return absl::InvalidArgumentError("a fill names no leaf");
  std::set<std::string> seen;
  for (const Fill& fill : fills) {
    if (auto s = ValidatePath(fill.path); !s.ok()) return s;
    if (!seen.insert(EncodePath(fill.path)).second) {
      return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(fill.path), " is filled twice"));
    }
    const Leaf* leaf = schema.Find(fill.path);
    if (leaf == nullptr) {
      if (schema.Classify(fill.path) == DictSchema::PathKind::kNode) {
        return absl::FailedPreconditionError(
            StrCat(QuotedPath(fill.path), " is a sub-dict: fill its leaves"));
      }
      return absl::NotFoundError(
          StrCat("dict '", schema.meta.name, "' has no leaf ", QuotedPath(fill.path)));
    }
    if (leaf->record.kind != LeafKind::kTensor) {
      return absl::InvalidArgumentError(
          StrCat("leaf ", QuotedPath(fill.path), " holds ", LeafKindName(leaf->record.kind),
                 " values, not numbers: it cannot be filled; nothing was written"));
    }
    if (leaf->record.dtype != fill.dtype) {
      return absl::FailedPreconditionError(
          StrCat("leaf ", QuotedPath(fill.path), " is ", DTypeName(leaf->record.dtype), ", not ",
                 DTypeName(fill.dtype), ": it was replaced meanwhile; nothing was written"));
    }
    if (static_cast<int64_t>(fill.element.size()) != DTypeSize(fill.dtype)) {
      return absl::InvalidArgumentError(StrCat("leaf ", QuotedPath(fill.path), ": a ",
                                               DTypeName(fill.dtype), " element is ",
                                               DTypeSize(fill.dtype), " bytes, not ",
                                               fill.element.size()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDictQuota(const StoreOptions& options, const DictMeta& meta,
                            int64_t bytes_after) {
  const int64_t quota = options.dict_quota_bytes;
  if (quota <= 0 || bytes_after <= quota) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      StrCat("dict '", meta.name, "' would hold ", bytes_after, " bytes, over its quota of ",
             quota, " bytes (--dict-quota-bytes); nothing was written"));
}

absl::Status NamespaceQuotaError(const StoreOptions& options, int64_t used, int64_t bytes,
                                 std::string_view what) {
  return absl::ResourceExhaustedError(
      StrCat(what, " needs ", bytes, " bytes, but namespace '", options.ns, "' stores ", used,
             " of its quota of ", options.namespace_quota_bytes,
             " bytes (--namespace-quota-bytes); nothing was written"));
}

absl::Status MaxDictsError(const StoreOptions& options, int64_t count) {
  return absl::ResourceExhaustedError(StrCat("the namespace holds ", count,
                                             " dicts, its limit (--max-dicts ", options.max_dicts,
                                             ")"));
}

absl::Status CheckNewDict(const StoreOptions& options, std::string_view name,
                          const Shape& batch_shape, DictLayout layout, int64_t* rows_per_block,
                          int64_t* part_bytes) {
  if (auto s = ValidateDictName(name); !s.ok()) return s;
  if (auto s = ValidateShape(batch_shape, "batch shape"); !s.ok()) return s;
  if (layout == DictLayout::kRecord && batch_shape.empty()) {
    return absl::InvalidArgumentError(
        "a record dict keeps rows of batch dim 0 together: it needs batch dims");
  }
  if (*rows_per_block < 0 || *part_bytes < 0) {
    return absl::InvalidArgumentError("rows_per_block and part_bytes must be >= 0");
  }
  if (*rows_per_block == 0) *rows_per_block = options.default_rows_per_block;
  if (*part_bytes == 0) *part_bytes = options.default_part_bytes;
  // Redis strings stop at 512 MB; parts stay well below, in every store,
  // so that a dict's layout never depends on where it is kept.
  if (*part_bytes > (256ll << 20)) {
    return absl::InvalidArgumentError("part_bytes must be at most 256 MiB");
  }
  return absl::OkStatus();
}

absl::Status CheckNotRecordLeaf(const DictSchema& schema, const LeafPath& path,
                                const Leaf* replaced) {
  if (replaced == nullptr || !replaced->record.InSharedRecord()) return absl::OkStatus();
  return absl::FailedPreconditionError(StrCat(
      "dict '", schema.meta.name, "' keeps each row's leaves in one record (layout record): ",
      "leaf '", PathToDisplay(path), "' is in it and is written by rows (td[:] = value), not whole"));
}

absl::Status CheckLeafHeader(const Shape& batch_shape, const LeafPath& path,
                             const LeafRecord& leaf, int64_t byte_size) {
  auto expected = CheckNewLeaf(batch_shape, path, leaf);
  if (!expected.ok()) return expected.status();
  if (byte_size == *expected) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(
      "leaf ", QuotedPath(path), ": byte count ", byte_size, " does not match shape ",
      ShapeToString(leaf.shape), " of ", DTypeName(leaf.dtype), " (", *expected, " bytes)"));
}

bool SameLeafSchema(const LeafRecord& a, const LeafRecord& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.kind == b.kind &&
         (a.kind != LeafKind::kRagged || a.value == b.value);
}

absl::Status CheckLockedLeafWrite(const DictSchema& schema, const LeafPath& path,
                                  const Leaf* replaced, const LeafRecord& leaf,
                                  bool refuse_if_locked) {
  if (!schema.meta.locked) return absl::OkStatus();
  if (replaced != nullptr && SameLeafSchema(replaced->record, leaf) && !refuse_if_locked) {
    return absl::OkStatus();
  }
  return LockedError(schema.meta.name,
                     StrCat(replaced == nullptr ? "add leaf "
                            : refuse_if_locked  ? "replace leaf "
                                                : "reshape leaf ",
                            QuotedPath(path),
                            replaced != nullptr && refuse_if_locked ? " (set it in place instead)"
                                                                    : ""));
}

}  // namespace tdstore::store
