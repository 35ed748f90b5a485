// A call's ShmSpan resolved against the regions tdstored holds, in one
// place for both data streams (leaf_streams.h). A span naming a region
// tdstored does not hold fails FAILED_PRECONDITION and marks the call with
// trailing metadata tdstore-shm: unknown-region (common/shm_protocol.h), so
// the client knows to lend a new region or use the socket.
#ifndef TDSTORE_SERVER_SERVICE_SHM_SPANS_H_
#define TDSTORE_SERVER_SERVICE_SHM_SPANS_H_

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/shm/region_table.h"
#include "tdstore/v1/tdstore.pb.h"

namespace tdstore::service {

// `regions` null: tdstored offers no shared memory (every span unknown).
absl::StatusOr<shm::Span> ResolveShmSpan(grpc::ServerContextBase* ctx,
                                         const shm::RegionTable* regions,
                                         const v1::ShmSpan& span);

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_SHM_SPANS_H_
