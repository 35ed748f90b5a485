// Conversions between the core's public types (tdstore/core.h) and the wire
// messages. The one place that knows how a Key, a dtype, a shape or an index
// looks in tdstore.v1.
#ifndef TDSTORE_CLIENT_CORE_SRC_CONVERT_H_
#define TDSTORE_CLIENT_CORE_SRC_CONVERT_H_

#include <cstdint>
#include <vector>

#include "google/protobuf/repeated_field.h"
#include "tdstore/core.h"
#include "tdstore/v1/tdstore.pb.h"

namespace tdstore::core {

void ToProto(const Key& key, v1::Path* path);
Key FromProto(const v1::Path& path);

// INVALID_ARGUMENT naming `path` for kUnspecified or a number no dtype has.
v1::DType ToProtoDType(DType dtype, const Key& path);
// The server sent a dtype this client does not know (a newer server):
// UNIMPLEMENTED, naming the leaf.
DType FromProtoDType(int dtype, const Key& path);

std::vector<int64_t> FromProto(const google::protobuf::RepeatedField<int64_t>& dims);

LeafMeta FromProto(const v1::LeafInfo& leaf);
// A read stream's leaf header: the same four fields as LeafInfo.
LeafMeta FromProto(const v1::LeafHeader& header);
DictInfo FromProto(const v1::DictInfo& info);

// An Index as the wire's message. INVALID_ARGUMENT for what the client can
// already tell is wrong (a slice step <= 0, by the server's own
// plan::CheckSliceStep); bounds are the server's to check.
void ToProto(const Index& index, v1::Index* out);

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_CONVERT_H_
