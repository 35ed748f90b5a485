// Where a Redis server is and how to log in to it.
//
// Pure parsing, no I/O. Safe to call from any thread.
#ifndef TDSTORE_SERVER_REDIS_REDIS_ADDRESS_H_
#define TDSTORE_SERVER_REDIS_REDIS_ADDRESS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tdstore::redis {

struct RedisAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp
  int port = 6379;   // kTcp
  std::string path;  // kUnix: socket path
  std::string user;      // empty: no ACL user ("default")
  std::string password;  // empty: no AUTH. Never log it.
  int db = 0;

  // The address for logs and error messages: "redis://user:***@host:port/db";
  // never contains the password.
  std::string Redacted() const;
};

// Accepts
//   redis://[user:password@]host:port[/db]   (also redis://[:password@]host...)
//   unix:///path/redis.sock[?db=N]
// Percent-escapes in user and password are decoded. INVALID_ARGUMENT with a
// message that never repeats the password for anything else.
absl::StatusOr<RedisAddress> ParseRedisUrl(std::string_view url);

// True for a "redis-cluster://" URL.
bool IsClusterUrl(std::string_view url);

// Accepts redis-cluster://[user:password@]host1:port1,host2:port2,... (the
// seed nodes of a Redis Cluster; the credentials apply to every node) and
// returns one address per seed. INVALID_ARGUMENT as ParseRedisUrl; a
// database number is rejected (a cluster has only db 0).
absl::StatusOr<std::vector<RedisAddress>> ParseClusterUrl(std::string_view url);

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_REDIS_ADDRESS_H_
