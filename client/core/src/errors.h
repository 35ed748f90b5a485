// grpc::Status -> tdstore::Error.
#ifndef TDSTORE_CLIENT_CORE_SRC_ERRORS_H_
#define TDSTORE_CLIENT_CORE_SRC_ERRORS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "tdstore/core.h"

namespace tdstore {

// The error a failed call reports. `address` is the daemon's: for UNAVAILABLE
// and DEADLINE_EXCEEDED the message says which daemon was called, since
// gRPC's own text ("failed to connect to all addresses") does not.
Error ErrorFromStatus(const grpc::Status& status, const std::string& address);

}  // namespace tdstore

#endif  // TDSTORE_CLIENT_CORE_SRC_ERRORS_H_
