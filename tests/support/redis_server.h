// Test harness: a real redis-server child process on a free loopback port.
//
//   RedisServerProcess redis;                 // not started
//   ASSERT_TRUE(redis.Start().ok());          // private temp dir, free port
//   redis.url();                              // "redis://127.0.0.1:PORT"
//   redis.Stop();  redis.Start();             // restart (same port)
//
// The child runs with no persistence (save "" / appendonly no), listens on
// 127.0.0.1 only, and dies with the test process (PR_SET_PDEATHSIG). The
// destructor stops it and removes its directory.
//
// Not thread-safe: drive it from the test's main thread.
#ifndef TDSTORE_TESTS_SUPPORT_REDIS_SERVER_H_
#define TDSTORE_TESTS_SUPPORT_REDIS_SERVER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tdstore::testing {

struct RedisServerOptions {
  std::string binary = "/usr/bin/redis-server";
  // Non-empty: `requirepass` (user "default").
  std::string password;
  // Non-empty with acl_password: an extra ACL user with all rights.
  std::string acl_user;
  std::string acl_password;
  // Extra `--name value` arguments for redis-server.
  std::vector<std::string> extra_args;
};

class RedisServerProcess {
 public:
  explicit RedisServerProcess(RedisServerOptions options = {});
  ~RedisServerProcess();

  // Picks a free port on first start (kept across restarts), starts the
  // server and waits until it answers PING (10 s). Error with the log tail.
  absl::Status Start();
  // SIGTERM, then SIGKILL after 5 s; waits for the child. Idempotent.
  void Stop();
  // SIGKILL without waiting for a clean shutdown (fault tests).
  void Kill();
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  // "redis://127.0.0.1:PORT" (with the credentials when set).
  std::string url() const;
  const std::string& dir() const { return dir_; }

  // Runs redis-cli-like commands through a private hiredis connection and
  // returns the reply flattened to strings (arrays element-wise; integers in
  // decimal; nil as "(nil)"). For assertions: DBSIZE, KEYS, DUMP, ...
  std::vector<std::string> Command(const std::vector<std::string>& argv) const;
  // All keys matching a glob (via SCAN), sorted.
  std::vector<std::string> Keys(const std::string& pattern = "*") const;

 private:
  RedisServerOptions options_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string dir_;
};

// A free TCP port on 127.0.0.1 (bind to port 0, read it, close).
int PickFreePort();

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_SUPPORT_REDIS_SERVER_H_
