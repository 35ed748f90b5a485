// A private redis-server child process for tdstored's embedded default.
//
// Start() creates a private directory (mode 0700) under $TMPDIR, runs
// `redis-server` listening only on a unix socket in it (no TCP port), and
// waits until it answers PING. Without data_dir nothing is persisted; with it
// Redis keeps an append-only file there. It runs with `maxmemory` and
// `maxmemory-policy noeviction`: past the limit Redis refuses writes (OOM,
// which callers see as RESOURCE_EXHAUSTED) instead of growing until the
// kernel kills it. The child gets SIGTERM if tdstored dies
// (PR_SET_PDEATHSIG), so it never outlives its parent.
//
// Supervise() starts a watcher thread: when the child exits for any reason
// but Stop(), the watcher reports it, then starts a new child with the same
// arguments on the same socket path (backoff 100 ms doubling to 5 s while
// starts fail). With data_dir the new child loads the append-only file;
// without, it starts empty: every dict is lost (the report says so).
// Clients see the socket refuse connections meanwhile; the health monitor
// turns NOT_SERVING and back.
//
// Stop() (also run by the destructor) stops the watcher, sends SIGTERM,
// waits for the child and removes the private directory. Start/Supervise/
// Stop from one thread (main); pid() from any. Call Start() from a thread
// that lives as long as the process (main): Linux ties PR_SET_PDEATHSIG to
// the thread that forked (restarts fork on the watcher thread, which lives
// until Stop()).
#ifndef TDSTORE_SERVER_REDIS_EMBEDDED_REDIS_H_
#define TDSTORE_SERVER_REDIS_EMBEDDED_REDIS_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis/redis_address.h"

namespace tdstore::redis {

struct EmbeddedRedisOptions {
  std::string binary = "redis-server";  // looked up on PATH
  std::string data_dir;                 // empty: no persistence
  int64_t maxmemory_bytes = 0;          // 0: Redis' own default (none)
  std::chrono::milliseconds start_timeout{10000};
};

// The bytes `percent` % of this machine's RAM, or of this process's
// address-space limit (RLIMIT_AS, inherited by the child) if lower.
int64_t MemoryFraction(int percent);

class EmbeddedRedis {
 public:
  // FAILED_PRECONDITION if the binary cannot be run; UNAVAILABLE if it does
  // not answer within start_timeout (its log tail is in the message).
  static absl::StatusOr<std::unique_ptr<EmbeddedRedis>> Start(const EmbeddedRedisOptions& options);
  ~EmbeddedRedis();

  // Called from the watcher thread with one line to log; `error` for the
  // exit and failed restarts, not for a successful restart. Must not block.
  using Report = std::function<void(bool error, const std::string& line)>;
  // Starts the watcher (once).
  void Supervise(Report report);

  // unix:///<private dir>/redis.sock
  const RedisAddress& address() const { return address_; }
  // The current child's pid, or -1 while there is none (between a death
  // and its restart).
  pid_t pid() const;
  // Children started after the first.
  int restarts() const;
  void Stop();

 private:
  EmbeddedRedis() = default;
  // Forks a child with args_ (refused once stopping_) and waits until it
  // answers PING; on failure no child is left.
  absl::Status SpawnAndWait();
  void Watch();

  RedisAddress address_;
  std::string dir_;
  std::string binary_;
  std::string log_path_;
  std::vector<std::string> args_;
  std::chrono::milliseconds start_timeout_{10000};
  bool persistent_ = false;  // --appendonly yes
  Report report_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  pid_t pid_ = -1;         // guarded by mu_
  int restarts_ = 0;       // guarded by mu_
  std::thread watcher_;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_EMBEDDED_REDIS_H_
