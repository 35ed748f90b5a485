// Checks of one request against ServiceLimits (service_limits.h), done
// before the request touches the store, so a refused call writes nothing.
//
// Amounts over a limit are RESOURCE_EXHAUSTED; sizes a well-formed request
// can never have (a name or path longer than allowed) are INVALID_ARGUMENT.
// Every message names the limit's setting, so an operator knows what to
// raise. Pure functions; safe from any thread.
#ifndef TDSTORE_SERVER_SERVICE_REQUEST_LIMITS_H_
#define TDSTORE_SERVER_SERVICE_REQUEST_LIMITS_H_

#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/repeated_field.h"
#include "server/service/service_limits.h"
#include "tdstore/v1/tdstore.pb.h"

namespace tdstore::service {

// A dict name longer than max_name_bytes: INVALID_ARGUMENT.
absl::Status CheckDictName(const ServiceLimits& limits, std::string_view name);

// One path longer than max_path_bytes once written "a/b/c" (counting each
// component and separator): INVALID_ARGUMENT.
absl::Status CheckPath(const ServiceLimits& limits, const v1::Path& path);

// More than max_leaves_per_call paths: RESOURCE_EXHAUSTED; then CheckPath on
// each.
absl::Status CheckPaths(const ServiceLimits& limits,
                        const google::protobuf::RepeatedPtrField<v1::Path>& paths);

// An index whose length (the elements of every positions tensor and mask,
// plus one per other item) exceeds max_index_length: RESOURCE_EXHAUSTED.
// Also INVALID_ARGUMENT when a positions tensor's shape does not multiply
// out to its value count — checked here, before the planner would allocate
// for it.
absl::Status CheckIndex(const ServiceLimits& limits, const v1::Index& index);

// A call moving more than max_call_bytes: RESOURCE_EXHAUSTED.
absl::Status CheckCallBytes(const ServiceLimits& limits, int64_t bytes);

// A call naming or carrying more than max_leaves_per_call leaves:
// RESOURCE_EXHAUSTED.
absl::Status CheckLeafCount(const ServiceLimits& limits, int64_t leaves);

// The whole request, for the unary RPCs and ReadLeaves: name, paths, index
// and, for CreateDict, the schema's size.
absl::Status CheckRequest(const ServiceLimits& limits, const v1::CreateDictRequest& req);
absl::Status CheckRequest(const ServiceLimits& limits, const v1::ReadLeavesRequest& req);
absl::Status CheckRequest(const ServiceLimits& limits, const v1::DeleteLeavesRequest& req);
// WriteBegin: the dict name, the announced leaf count and the index.
absl::Status CheckRequest(const ServiceLimits& limits, const v1::WriteBegin& begin);

}  // namespace tdstore::service

#endif  // TDSTORE_SERVER_SERVICE_REQUEST_LIMITS_H_
