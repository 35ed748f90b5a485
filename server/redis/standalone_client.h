// RedisClient for one standalone Redis server: a pool of connections.
//
// Connections are opened lazily, reused, and dropped after a transport
// error; the next call opens a fresh one, so a restarted Redis is picked up
// without restarting tdstored. Scripts are loaded on NOSCRIPT.
//
// Thread-safe.
#ifndef TDSTORE_SERVER_REDIS_STANDALONE_CLIENT_H_
#define TDSTORE_SERVER_REDIS_STANDALONE_CLIENT_H_

#include <memory>
#include <mutex>
#include <vector>

#include "server/redis/connection.h"
#include "server/redis/redis_address.h"
#include "server/redis/redis_client.h"

namespace tdstore::redis {

class StandaloneClient : public RedisClient {
 public:
  // Does not connect; the first call does. max_idle: connections kept open
  // for reuse (more may be open while busy).
  StandaloneClient(RedisAddress address, ConnectOptions options, int max_idle = 16);
  ~StandaloneClient() override;

  absl::StatusOr<Reply> Call(std::string_view routing_key,
                             absl::Span<const std::string_view> argv) override;
  absl::StatusOr<Reply> Eval(const Script& script, absl::Span<const std::string_view> keys,
                             absl::Span<const std::string_view> args) override;
  absl::StatusOr<Reply> EvalDurable(const Script& script, absl::Span<const std::string_view> keys,
                                    absl::Span<const std::string_view> args, int replicas,
                                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<std::vector<Reply>> CallOnEveryMaster(
      absl::Span<const std::string_view> argv) override;
  absl::StatusOr<std::unique_ptr<Pipeline>> NewPipeline(int max_outstanding) override;
  bool pipelines_in_order() const override { return true; }  // one connection
  std::string Describe() const override;
  absl::StatusOr<std::unique_ptr<Connection>> ConnectForSubscribe() override;

  // Takes a connection from the pool or opens one. UNAVAILABLE on failure.
  absl::StatusOr<std::unique_ptr<Connection>> Acquire();
  // Returns a connection to the pool; broken or busy ones are closed.
  void Release(std::unique_ptr<Connection> conn);

 private:
  const RedisAddress address_;
  const ConnectOptions options_;
  const int max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_STANDALONE_CLIENT_H_
