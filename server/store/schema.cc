#include "server/store/schema.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "common/leaf_kind_check.h"
#include "common/str_cat.h"

namespace tdstore::store {

int64_t RecordBytes(const LeafRecord& record) {
  auto bytes = ByteSize(record.shape, DTypeSize(record.dtype));
  return bytes.ok() ? *bytes : 0;
}

int64_t RowBytes(const LeafRecord& record) {
  if (record.shape.empty()) return 0;
  auto bytes = ByteSize(absl::MakeConstSpan(record.shape).subspan(1), DTypeSize(record.dtype));
  return bytes.ok() ? *bytes : 0;
}

int64_t GenerationBytes(const LeafRecord& record) {
  if (!record.InSharedRecord() || record.shape.empty()) return RecordBytes(record);
  auto bytes = ByteSize(std::vector<int64_t>{record.shape[0], record.in_record.stride}, 1);
  return bytes.ok() ? *bytes : 0;
}

std::string_view DictLayoutName(DictLayout layout) {
  return layout == DictLayout::kRecord ? "record" : "leaves";
}

int64_t DictSchema::StoredBytes() const {
  int64_t total = 0;
  std::set<int64_t> records;  // shared generations, counted once
  for (const auto& [_, leaf] : leaves) {
    if (!leaf.record.InSharedRecord()) {
      total += RecordBytes(leaf.record);
    } else if (records.insert(leaf.record.generation).second) {
      total += GenerationBytes(leaf.record);
    }
  }
  return total;
}

std::vector<const Leaf*> DictSchema::RecordLeaves() const {
  std::vector<const Leaf*> out;
  for (const auto& [_, leaf] : leaves) {
    if (leaf.record.InSharedRecord()) out.push_back(&leaf);
  }
  return out;
}

absl::StatusOr<BlockLayout> DictSchema::Layout(const LeafRecord& record) const {
  return BlockLayout::Make(meta.batch_shape, record.shape, DTypeSize(record.dtype),
                           meta.rows_per_block, meta.part_bytes, record.in_record.stride,
                           record.in_record.offset);
}

const Leaf* DictSchema::Find(const LeafPath& path) const {
  auto it = leaves.find(EncodePath(path));
  return it == leaves.end() ? nullptr : &it->second;
}

std::vector<const Leaf*> DictSchema::Under(const LeafPath& prefix) const {
  std::vector<const Leaf*> out;
  const std::string exact = EncodePath(prefix);
  const std::string below = exact + "/";
  // Encoded paths under a prefix sort contiguously after the prefix itself.
  for (auto it = leaves.lower_bound(exact); it != leaves.end(); ++it) {
    const std::string& key = it->first;
    if (key == exact) {
      out.push_back(&it->second);
    } else if (key.compare(0, below.size(), below) == 0) {
      out.push_back(&it->second);
    } else if (key.compare(0, exact.size(), exact) != 0) {
      break;  // past every key that starts with `exact`
    }
  }
  return out;
}

absl::StatusOr<std::vector<const Leaf*>> DictSchema::Select(
    const std::vector<LeafPath>& paths) const {
  std::map<std::string, const Leaf*> selected;  // encoded path order, unique
  if (paths.empty()) {
    for (const auto& [encoded, leaf] : leaves) selected.emplace(encoded, &leaf);
  }
  for (const LeafPath& path : paths) {
    std::vector<const Leaf*> under = Under(path);
    if (under.empty()) {
      return absl::NotFoundError(
          StrCat("dict '", meta.name, "' has no leaf '", PathToDisplay(path), "'"));
    }
    for (const Leaf* leaf : under) selected.emplace(EncodePath(leaf->path), leaf);
  }
  std::vector<const Leaf*> out;
  out.reserve(selected.size());
  for (const auto& [_, leaf] : selected) out.push_back(leaf);
  return out;
}

std::vector<LeafPath> DictSchema::LeafPaths() const {
  std::vector<LeafPath> paths;
  paths.reserve(leaves.size());
  for (const auto& [_, leaf] : leaves) paths.push_back(leaf.path);
  return paths;
}

DictSchema::PathKind DictSchema::Classify(const LeafPath& path) const {
  return ClassifyPath(LeafPaths(), path);
}

std::vector<LeafPath> DictSchema::Keys(bool include_nested, bool leaves_only) const {
  return ListKeys(LeafPaths(), include_nested, leaves_only);
}


namespace {
std::string Quoted(const LeafPath& path) { return StrCat("'", PathToDisplay(path), "'"); }
}  // namespace

absl::StatusOr<int64_t> CheckNewLeaf(const Shape& batch_shape, const LeafPath& path,
                                     const LeafRecord& leaf) {
  if (auto s = ValidatePath(path); !s.ok()) return s;
  const DType dtype = leaf.dtype;
  const Shape& shape = leaf.shape;
  if (dtype == DType::kUnspecified || !IsKnownDType(static_cast<int>(dtype))) {
    return absl::InvalidArgumentError(
        StrCat("leaf ", Quoted(path), ": unknown dtype ", static_cast<int>(dtype)));
  }
  if (auto s = ValidateShape(shape, StrCat("shape of leaf ", Quoted(path))); !s.ok()) return s;
  if (!HasPrefix(shape, batch_shape)) {
    return absl::InvalidArgumentError(StrCat(
        "leaf ", Quoted(path), " has shape ", ShapeToString(shape),
        " but the dict's batch shape is ", ShapeToString(batch_shape),
        ": a leaf's leading dims must equal the batch shape"));
  }
  if (auto s = CheckLeafKind(leaf.kind, dtype, shape, batch_shape.size(), leaf.value); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("leaf ", Quoted(path), ": ", s.message()));
  }
  auto bytes = ByteSize(shape, DTypeSize(dtype));
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(StrCat("leaf ", Quoted(path), ": ", bytes.status().message()));
  }
  return *bytes;
}

absl::StatusOr<int64_t> CheckNewLeaf(const Shape& batch_shape, const LeafPath& path, DType dtype,
                                     const Shape& shape) {
  return CheckNewLeaf(batch_shape, path, LeafRecord{dtype, shape, 0});
}

absl::Status CheckDisjoint(const LeafPath& a, const LeafPath& b) {
  if (a == b) return absl::InvalidArgumentError(StrCat("leaf ", Quoted(a), " appears twice"));
  if (IsPathPrefix(a, b) || IsPathPrefix(b, a)) {
    return absl::InvalidArgumentError(StrCat("leaves ", Quoted(a), " and ", Quoted(b),
                                             " cannot both exist: one would be nested in the "
                                             "other"));
  }
  return absl::OkStatus();
}

absl::Status CheckNesting(const DictSchema& schema, const LeafPath& path) {
  for (const auto& [_, existing] : schema.leaves) {
    if (existing.path != path &&
        (IsPathPrefix(existing.path, path) || IsPathPrefix(path, existing.path))) {
      return absl::FailedPreconditionError(
          StrCat("cannot write leaf ", Quoted(path), ": it conflicts with leaf ",
                 Quoted(existing.path), " (a path cannot be both a leaf and a sub-dict)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tdstore::store
