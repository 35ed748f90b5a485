// Conversions between the wire types (tdstore.v1) and the store's types, and
// from absl::Status to grpc::Status.
//
// Pure functions; safe from any thread.
#ifndef TDSTORE_SERVER_SERVICE_PROTO_CONVERT_H_
#define TDSTORE_SERVER_SERVICE_PROTO_CONVERT_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/index.h"
#include "common/path.h"
#include "common/shape.h"
#include "grpcpp/support/status.h"
#include "server/store/store.h"
#include "tdstore/v1/tdstore.pb.h"

namespace tdstore::service {

// absl and gRPC share code numbers; the message is passed through. Except:
// PERMISSION_DENIED and UNAUTHENTICATED, which from the store mean Redis
// refused tdstored's own credentials, become FAILED_PRECONDITION ("tdstored
// cannot use its Redis: ..."), so clients never mistake them for a refusal
// of their token.
grpc::Status ToGrpc(const absl::Status& status);

// For access-control decisions (access_control.h): the code as it is.
grpc::Status AccessToGrpc(const absl::Status& status);

// INVALID_ARGUMENT for a path the store would reject (empty, too long, ...).
absl::StatusOr<LeafPath> FromProto(const v1::Path& path);
void ToProto(const LeafPath& path, v1::Path* out);

// INVALID_ARGUMENT for a number that is not a known dtype.
absl::StatusOr<DType> FromProto(v1::DType dtype);
// INVALID_ARGUMENT for a kind number this daemon does not know.
absl::StatusOr<LeafKind> FromProto(v1::LeafKind kind);

// The wire index as the planner's plan::IndexSpec. INVALID_ARGUMENT for an item
// with no kind or a step given as 0 or less is left to plan::ResolveIndex.
absl::StatusOr<plan::IndexSpec> FromProto(const v1::Index& index);

Shape ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& dims);

void ToProto(const store::Leaf& leaf, v1::LeafInfo* out);
void ToProto(const store::DictSchema& schema, v1::DictInfo* out);

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_PROTO_CONVERT_H_
