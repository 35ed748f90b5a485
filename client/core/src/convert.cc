#include "client/core/src/convert.h"

#include <string>

#include "absl/status/status.h"
#include "common/index.h"

namespace tdstore::core {

void ToProto(const Key& key, v1::Path* path) {
  path->mutable_components()->Assign(key.parts().begin(), key.parts().end());
}

Key FromProto(const v1::Path& path) {
  return Key(std::vector<std::string>(path.components().begin(), path.components().end()));
}

v1::DType ToProtoDType(DType dtype, const Key& path) {
  if (!IsKnownDType(static_cast<int>(dtype))) {
    throw Error(StatusCode::kInvalidArgument,
                "leaf '" + path.str() + "' has no dtype tdstore can store (" +
                    std::string(KnownDTypeNames()) + ")");
  }
  // DType numbers equal the wire's (common/dtype.h).
  return static_cast<v1::DType>(dtype);
}

DType FromProtoDType(int dtype, const Key& path) {
  if (!IsKnownDType(dtype)) {
    throw Error(StatusCode::kUnimplemented,
                "leaf '" + path.str() + "' has dtype number " + std::to_string(dtype) +
                    ", which this client does not know (is tdstored newer?)");
  }
  return static_cast<DType>(dtype);
}

std::vector<int64_t> FromProto(const google::protobuf::RepeatedField<int64_t>& dims) {
  return std::vector<int64_t>(dims.begin(), dims.end());
}

namespace {

// LeafInfo and LeafHeader carry the same fields under the same names.
template <typename Message>
LeafMeta LeafMetaOf(const Message& leaf) {
  LeafMeta out;
  out.path = FromProto(leaf.path());
  out.dtype = FromProtoDType(leaf.dtype(), out.path);
  out.shape = FromProto(leaf.shape());
  out.byte_size = leaf.byte_size();
  if (!IsKnownLeafKind(leaf.kind())) {
    throw Error(StatusCode::kUnimplemented,
                "leaf '" + out.path.str() + "' has kind number " + std::to_string(leaf.kind()) +
                    ", which this client does not know (is tdstored newer?)");
  }
  out.kind = static_cast<LeafKind>(leaf.kind());  // numbers equal the wire's
  out.value = leaf.value();
  return out;
}

}  // namespace

LeafMeta FromProto(const v1::LeafInfo& leaf) { return LeafMetaOf(leaf); }

LeafMeta FromProto(const v1::LeafHeader& header) { return LeafMetaOf(header); }

DictInfo FromProto(const v1::DictInfo& info) {
  DictInfo out;
  out.name = info.name();
  out.id = info.id();
  out.batch_size = FromProto(info.batch_shape());
  out.leaves.reserve(info.leaves_size());
  for (const v1::LeafInfo& leaf : info.leaves()) out.leaves.push_back(FromProto(leaf));
  out.rows_per_block = info.rows_per_block();
  out.part_bytes = info.part_bytes();
  out.layout = info.layout() == v1::DICT_LAYOUT_RECORD ? Layout::kRecord : Layout::kLeaves;
  out.version = info.version();
  out.locked = info.locked();
  out.attrs.insert(info.attrs().begin(), info.attrs().end());
  return out;
}

void ToProto(const Index& index, v1::Index* out) {
  out->Clear();
  for (size_t i = 0; i < index.size(); ++i) {
    const IndexTerm& term = index[i];
    v1::IndexItem* item = out->add_items();
    switch (term.kind()) {
      case IndexTerm::Kind::kInt:
        item->set_integer(term.position());
        break;
      case IndexTerm::Kind::kSlice: {
        const Slice& slice = term.slice();
        // The server's rule (common/index.h), applied here too so a bad
        // step costs no call.
        if (absl::Status s = plan::CheckSliceStep(i, slice.step); !s.ok()) {
          throw Error(StatusCode::kInvalidArgument, std::string(s.message()));
        }
        v1::Slice* proto = item->mutable_slice();
        if (slice.start) proto->set_start(*slice.start);
        if (slice.stop) proto->set_stop(*slice.stop);
        proto->set_step(slice.step);
        break;
      }
      case IndexTerm::Kind::kEllipsis:
        item->mutable_ellipsis();
        break;
      case IndexTerm::Kind::kPositions: {
        v1::IndexItem::Positions* proto = item->mutable_positions();
        proto->mutable_values()->Assign(term.values().begin(), term.values().end());
        // A 0-d index has the empty shape and one value.
        proto->mutable_shape()->Assign(term.shape().begin(), term.shape().end());
        break;
      }
      case IndexTerm::Kind::kMask: {
        auto* values = item->mutable_mask()->mutable_values();
        values->Reserve(static_cast<int>(term.mask().size()));
        for (bool selected : term.mask()) values->Add(selected);
        break;
      }
    }
  }
}

}  // namespace tdstore::core
