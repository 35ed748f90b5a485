#include "server/redis_store/schema_text.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "common/str_cat.h"

namespace tdstore::store {

namespace {

absl::StatusOr<int64_t> ParseInt(const std::string& text, std::string_view field) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::DataLossError(StrCat("meta field '", field, "' is not a number: ", text));
  }
  return v;
}

}  // namespace

absl::StatusOr<BlockLayout> GenerationExtent(const DictMeta& meta, const LeafRecord& record) {
  const size_t batch_dims = meta.batch_shape.size();
  if (record.shape.size() < batch_dims) {
    return absl::DataLossError(StrCat("a leaf record of dict id ", meta.id, " has shape [",
                                      ShapeToCsv(record.shape), "], fewer dims than its batch"));
  }
  Shape shape = record.shape;
  if (batch_dims > 0) shape[0] = std::max(shape[0], meta.rows_high);
  const Shape batch(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(batch_dims));
  return BlockLayout::Make(batch, shape, DTypeSize(record.dtype), meta.rows_per_block,
                           meta.part_bytes, record.in_record.stride, record.in_record.offset);
}

absl::StatusOr<DictSchema> ParseSchema(std::string id,
                                       const std::vector<std::string>& meta_fields,
                                       const std::vector<std::string>& leaf_fields,
                                       const std::vector<std::string>& attr_fields) {
  if (meta_fields.empty()) {
    return absl::NotFoundError(StrCat("dict id ", id, " has no meta record"));
  }
  DictSchema schema;
  schema.meta.id = std::move(id);
  std::set<std::string> seen;
  for (size_t i = 0; i + 1 < meta_fields.size(); i += 2) {
    const std::string& f = meta_fields[i];
    const std::string& v = meta_fields[i + 1];
    seen.insert(f);
    if (f == kMetaDeleting) {
      schema.meta.deleting = true;
    } else if (f == kMetaLocked) {
      schema.meta.locked = true;
    } else if (f == kMetaRowsHigh) {
      auto n = ParseInt(v, f);
      if (!n.ok()) return n.status();
      schema.meta.rows_high = *n;
    } else if (f == kMetaName) {
      schema.meta.name = v;
    } else if (f == kMetaBatchShape) {
      auto shape = ShapeFromCsv(v);
      if (!shape.ok()) return absl::DataLossError(shape.status().message());
      schema.meta.batch_shape = *std::move(shape);
    } else if (f == kMetaRowsPerBlock) {
      auto n = ParseInt(v, f);
      if (!n.ok()) return n.status();
      schema.meta.rows_per_block = *n;
    } else if (f == kMetaPartBytes) {
      auto n = ParseInt(v, f);
      if (!n.ok()) return n.status();
      schema.meta.part_bytes = *n;
    } else if (f == kMetaLayout) {
      if (v != "leaves" && v != "record") {
        return absl::DataLossError(StrCat("dict id ", schema.meta.id, ": unknown layout '", v, "'"));
      }
      schema.meta.layout = v == "record" ? DictLayout::kRecord : DictLayout::kLeaves;
    } else if (f == kMetaVersion) {
      auto n = ParseInt(v, f);
      if (!n.ok()) return n.status();
      schema.meta.version = *n;
    }
  }
  for (const char* required : {kMetaBatchShape, kMetaRowsPerBlock, kMetaPartBytes}) {
    if (!seen.count(required)) {
      return absl::DataLossError(
          StrCat("dict id ", schema.meta.id, ": meta lacks field '", required, "'"));
    }
  }
  if (schema.meta.rows_per_block < 1 || schema.meta.part_bytes < 1) {
    return absl::DataLossError(StrCat("dict id ", schema.meta.id, ": bad block layout"));
  }
  for (size_t i = 0; i + 1 < leaf_fields.size(); i += 2) {
    auto path = DecodePath(leaf_fields[i]);
    if (!path.ok()) return absl::DataLossError(path.status().message());
    auto record = DecodeLeafRecord(leaf_fields[i + 1]);
    if (!record.ok()) return record.status();
    schema.leaves.emplace(leaf_fields[i], Leaf{*std::move(path), *std::move(record)});
  }
  for (size_t i = 0; i + 1 < attr_fields.size(); i += 2) {
    schema.attrs.emplace(attr_fields[i], attr_fields[i + 1]);
  }
  return schema;
}

}  // namespace tdstore::store
