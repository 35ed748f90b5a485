// Turning Redis replies into absl::Status for the store layer.
//
// Scripts signal expected failures with error replies whose first word is a
// tag (TDNOTFOUND, TDEXISTS, TDCONFLICT, TDSWEPT) and a detail after a
// space (Redis would prefix a one-word error with "ERR"); anything else an error
// reply can say is unexpected and becomes INTERNAL, except Redis' OOM, which
// is RESOURCE_EXHAUSTED.
#ifndef TDSTORE_SERVER_REDIS_STORE_REDIS_ERRORS_H_
#define TDSTORE_SERVER_REDIS_STORE_REDIS_ERRORS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/redis/reply.h"
#include "server/store/outcome.h"

namespace tdstore::store {

// OK for a non-error reply; the mapped status for an error reply. `what`
// names the operation for the message.
// (Each takes a reply or an element of one, as EXEC's replies are.)
absl::Status ReplyStatus(redis::ReplyView reply, std::string_view what);
inline absl::Status ReplyStatus(const redis::Reply& reply, std::string_view what) {
  return ReplyStatus(reply.view(), what);
}

// First word of an error reply ("TDNOTFOUND"), empty if not an error.
std::string_view ErrorTag(redis::ReplyView reply);
inline std::string_view ErrorTag(const redis::Reply& reply) { return ErrorTag(reply.view()); }
// The rest of an error reply after its tag.
std::string_view ErrorDetail(redis::ReplyView reply);
inline std::string_view ErrorDetail(const redis::Reply& reply) {
  return ErrorDetail(reply.view());
}

// OutcomeUnknown / IsOutcomeUnknown: server/store/outcome.h.

// The elements of an array reply of strings (HGETALL, HKEYS, ...).
std::vector<std::string> StringArray(const redis::Reply& reply);

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_REDIS_ERRORS_H_
