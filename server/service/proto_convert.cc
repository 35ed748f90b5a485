#include "server/service/proto_convert.h"

#include <string>

#include "common/str_cat.h"

namespace tdstore::service {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  if (absl::IsPermissionDenied(status) || absl::IsUnauthenticated(status)) {
    // From the store these codes mean Redis refused *tdstored's* credentials:
    // an operator problem. Passed through, a client would take them for a
    // refusal of its own token (access_control.h answers those with
    // AccessToGrpc).
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "tdstored cannot use its Redis: " + std::string(status.message()));
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::Status AccessToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::StatusOr<LeafPath> FromProto(const v1::Path& path) {
  LeafPath out(path.components().begin(), path.components().end());
  if (auto s = ValidatePath(out); !s.ok()) return s;
  return out;
}

void ToProto(const LeafPath& path, v1::Path* out) {
  for (const std::string& c : path) out->add_components(c);
}

absl::StatusOr<DType> FromProto(v1::DType dtype) {
  if (!IsKnownDType(static_cast<int>(dtype))) {
    return absl::InvalidArgumentError(StrCat("unknown dtype number ", static_cast<int>(dtype)));
  }
  return static_cast<DType>(dtype);
}

absl::StatusOr<plan::IndexSpec> FromProto(const v1::Index& index) {
  plan::IndexSpec spec;
  for (int i = 0; i < index.items_size(); ++i) {
    const v1::IndexItem& item = index.items(i);
    switch (item.kind_case()) {
      case v1::IndexItem::kInteger:
        spec.push_back(plan::IndexTerm::Int(item.integer()));
        break;
      case v1::IndexItem::kSlice: {
        const v1::Slice& s = item.slice();
        spec.push_back(plan::IndexTerm::Slice(s.has_start() ? std::optional<int64_t>(s.start())
                                                      : std::nullopt,
                                        s.has_stop() ? std::optional<int64_t>(s.stop())
                                                     : std::nullopt,
                                        s.has_step() ? s.step() : 1));
        break;
      }
      case v1::IndexItem::kPositions: {
        const auto& p = item.positions();
        spec.push_back(plan::IndexTerm::Positions(std::vector<int64_t>(p.values().begin(),
                                                                 p.values().end()),
                                            Shape(p.shape().begin(), p.shape().end())));
        break;
      }
      case v1::IndexItem::kMask:
        spec.push_back(plan::IndexTerm::Mask(
            std::vector<bool>(item.mask().values().begin(), item.mask().values().end())));
        break;
      case v1::IndexItem::kEllipsis:
        spec.push_back(plan::IndexTerm::Ellipsis());
        break;
      default:
        return absl::InvalidArgumentError(StrCat("index item ", i, " has no kind"));
    }
  }
  return spec;
}

Shape ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(dims.begin(), dims.end());
}

void ToProto(const store::Leaf& leaf, v1::LeafInfo* out) {
  ToProto(leaf.path, out->mutable_path());
  out->set_dtype(static_cast<v1::DType>(leaf.record.dtype));
  for (int64_t d : leaf.record.shape) out->add_shape(d);
  auto bytes = ByteSize(leaf.record.shape, DTypeSize(leaf.record.dtype));
  out->set_byte_size(bytes.ok() ? *bytes : -1);
  // LeafKind numbers equal the wire's (common/leaf_kind.h).
  out->set_kind(static_cast<v1::LeafKind>(leaf.record.kind));
  out->set_value(leaf.record.value);
}

absl::StatusOr<LeafKind> FromProto(v1::LeafKind kind) {
  if (!IsKnownLeafKind(static_cast<int>(kind))) {
    return absl::InvalidArgumentError(StrCat("unknown leaf kind ", static_cast<int>(kind)));
  }
  return static_cast<LeafKind>(kind);
}

void ToProto(const store::DictSchema& schema, v1::DictInfo* out) {
  out->set_name(schema.meta.name);
  out->set_id(schema.meta.id);
  for (int64_t d : schema.meta.batch_shape) out->add_batch_shape(d);
  for (const auto& [_, leaf] : schema.leaves) ToProto(leaf, out->add_leaves());
  out->set_rows_per_block(schema.meta.rows_per_block);
  out->set_part_bytes(schema.meta.part_bytes);
  out->set_layout(schema.meta.layout == store::DictLayout::kRecord ? v1::DICT_LAYOUT_RECORD
                                                                   : v1::DICT_LAYOUT_LEAVES);
  out->set_version(schema.meta.version);
  out->set_locked(schema.meta.locked);
  out->mutable_attrs()->insert(schema.attrs.begin(), schema.attrs.end());
}

}  // namespace tdstore::service
