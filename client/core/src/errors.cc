// tdstore::Error, its code names, and the mapping from gRPC statuses.
#include "client/core/src/errors.h"

namespace tdstore {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

Error::Error(StatusCode code, const std::string& message)
    : std::runtime_error(std::string(StatusCodeName(code)) + ": " + message),
      code_(code),
      message_(message) {}

Error ErrorFromStatus(const grpc::Status& status, const std::string& address) {
  // tdstore::StatusCode mirrors grpc::StatusCode number for number.
  const auto code = static_cast<StatusCode>(status.error_code());
  std::string message = status.error_message();
  if (message.empty()) message = "call failed";
  if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded) {
    message += " (tdstored at " + address + ")";
  }
  return Error(code, message);
}

}  // namespace tdstore
