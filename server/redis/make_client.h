// Builds the RedisClient a URL names: StandaloneClient for redis:// and
// unix://, ClusterClient for redis-cluster://.
//
// Does not connect. INVALID_ARGUMENT for a malformed URL (the message never
// contains the password). Thread-safe.
#ifndef TDSTORE_SERVER_REDIS_MAKE_CLIENT_H_
#define TDSTORE_SERVER_REDIS_MAKE_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/redis/connection.h"
#include "server/redis/redis_client.h"

namespace tdstore::redis {

// password_override, when non-empty, replaces the URL's password (for every
// node of a cluster).
absl::StatusOr<std::unique_ptr<RedisClient>> MakeRedisClient(std::string_view url,
                                                             const std::string& password_override,
                                                             const ConnectOptions& options);

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_MAKE_CLIENT_H_
