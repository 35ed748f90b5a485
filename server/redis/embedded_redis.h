// A private redis-server child process for tdstored's embedded default.
//
// Start() creates a private directory (mode 0700) under $TMPDIR, runs
// `redis-server` listening only on a unix socket in it (no TCP port), and
// waits until it answers PING. Without data_dir nothing is persisted; with it
// Redis keeps an append-only file there. The child gets SIGTERM if tdstored
// dies (PR_SET_PDEATHSIG), so it never outlives its parent.
//
// Stop() (also run by the destructor) sends SIGTERM, waits for the child and
// removes the private directory. Not thread-safe; owned by main(). Call
// Start() from a thread that lives as long as the process (main): Linux ties
// PR_SET_PDEATHSIG to the thread that forked.
#ifndef TDSTORE_SERVER_REDIS_EMBEDDED_REDIS_H_
#define TDSTORE_SERVER_REDIS_EMBEDDED_REDIS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/redis/redis_address.h"

namespace tdstore::redis {

struct EmbeddedRedisOptions {
  std::string binary = "redis-server";  // looked up on PATH
  std::string data_dir;                 // empty: no persistence
  std::chrono::milliseconds start_timeout{10000};
};

class EmbeddedRedis {
 public:
  // FAILED_PRECONDITION if the binary cannot be run; UNAVAILABLE if it does
  // not answer within start_timeout (its log tail is in the message).
  static absl::StatusOr<std::unique_ptr<EmbeddedRedis>> Start(const EmbeddedRedisOptions& options);
  ~EmbeddedRedis();

  // unix:///<private dir>/redis.sock
  const RedisAddress& address() const { return address_; }
  pid_t pid() const { return pid_; }
  void Stop();

 private:
  EmbeddedRedis() = default;
  RedisAddress address_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_EMBEDDED_REDIS_H_
