#include "client/src/convert.h"

#include "client/src/scalar_type.h"

namespace tdstore {

void ToProto(const Key& key, v1::Path* path) {
  path->mutable_components()->Assign(key.parts().begin(), key.parts().end());
}

Key FromProto(const v1::Path& path) {
  return Key(std::vector<std::string>(path.components().begin(), path.components().end()));
}

v1::DType ToProtoDType(at::ScalarType type, const Key& path) {
  std::optional<DType> dtype = DTypeFromScalarType(type);
  if (!dtype) {
    throw Error(StatusCode::kInvalidArgument,
                "leaf '" + path.str() + "' has dtype " + c10::toString(type) +
                    ", which tdstore cannot store (bool, uint8, int8, int16, int32, "
                    "int64, float16, bfloat16, float32, float64, complex64, complex128)");
  }
  // DType numbers equal the wire's (common/dtype.h).
  return static_cast<v1::DType>(*dtype);
}

at::ScalarType FromProtoDType(int dtype, const Key& path) {
  // An unknown number maps to no ScalarType: the table lists known ones only.
  std::optional<at::ScalarType> type = ScalarTypeFromDType(static_cast<DType>(dtype));
  if (!type) {
    throw Error(StatusCode::kUnimplemented,
                "leaf '" + path.str() + "' has dtype number " + std::to_string(dtype) +
                    ", which this client does not know (is tdstored newer?)");
  }
  return *type;
}

std::vector<int64_t> FromProto(const google::protobuf::RepeatedField<int64_t>& dims) {
  return std::vector<int64_t>(dims.begin(), dims.end());
}

LeafInfo FromProto(const v1::LeafInfo& leaf) {
  LeafInfo out;
  out.path = FromProto(leaf.path());
  out.dtype = FromProtoDType(leaf.dtype(), out.path);
  out.shape = FromProto(leaf.shape());
  out.byte_size = leaf.byte_size();
  return out;
}

DictInfo FromProto(const v1::DictInfo& info) {
  DictInfo out;
  out.name = info.name();
  out.id = info.id();
  out.batch_size = FromProto(info.batch_shape());
  out.leaves.reserve(info.leaves_size());
  for (const v1::LeafInfo& leaf : info.leaves()) out.leaves.push_back(FromProto(leaf));
  out.rows_per_block = info.rows_per_block();
  out.part_bytes = info.part_bytes();
  out.version = info.version();
  return out;
}

}  // namespace tdstore
