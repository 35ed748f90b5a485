// Conversions between the public types of client.h and the wire messages.
#ifndef TDSTORE_CLIENT_SRC_CONVERT_H_
#define TDSTORE_CLIENT_SRC_CONVERT_H_

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "google/protobuf/repeated_field.h"
#include "tdstore/client.h"
#include "tdstore/v1/tdstore.pb.h"

namespace tdstore {

void ToProto(const Key& key, v1::Path* path);
Key FromProto(const v1::Path& path);

// INVALID_ARGUMENT naming `path` for a dtype tdstore cannot store.
v1::DType ToProtoDType(at::ScalarType type, const Key& path);
// The server sent a dtype this client does not know (a newer server):
// UNIMPLEMENTED, naming the leaf.
at::ScalarType FromProtoDType(int dtype, const Key& path);

std::vector<int64_t> FromProto(const google::protobuf::RepeatedField<int64_t>& dims);

LeafInfo FromProto(const v1::LeafInfo& leaf);
DictInfo FromProto(const v1::DictInfo& info);

// An Index as the wire's message (index.cc). INVALID_ARGUMENT for what the
// client can already tell is wrong: a float or undefined index tensor, a bool
// mask that is not 1-D, a slice step <= 0. Bounds are the server's to check.
void ToProto(const Index& index, v1::Index* out);

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_SRC_CONVERT_H_
