// tdstored's Prometheus metrics, served as text on http://HOST:PORT/metrics.
//
// One object receives every event the daemon reports and keeps the counters:
//   - calls       (CallObserver, from call_interceptor.h)
//   - Redis       (redis::RedisEvents, from server/redis/redis_events.h)
//   - the sweeper (store::SweepObserver, from server/redis_store/sweeper.h)
// and reads one value at each scrape: what the Redis replies' string pool
// keeps (server/redis/reply_objects.h).
// Every metric is named tdstore_*; docs/operations.md ("Metrics") lists them
// with their labels. Labels never carry secrets: Redis nodes are host:port
// or a socket path, methods are gRPC method names.
//
//   auto metrics = PrometheusMetrics::Start("127.0.0.1:9100", "0.1.0");
//   if (!metrics.ok()) ...                // cannot listen there
//   ConnectOptions o; o.events = metrics->get();
//   Sweeper sweeper(&store, metrics->get());
//   ... CallInterceptorFactory(metrics->get(), ...) ...
//
// Thread-safe: every method may be called from any thread. The object must
// outlive everything that reports to it (the gRPC server, the Redis client,
// the sweeper); destroying it stops the HTTP endpoint.
#ifndef TDSTORE_SERVER_METRICS_PROMETHEUS_METRICS_H_
#define TDSTORE_SERVER_METRICS_PROMETHEUS_METRICS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "server/metrics/call_interceptor.h"
#include "server/redis/redis_events.h"
#include "server/redis_store/sweeper.h"

namespace prometheus {
class Collectable;
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace tdstore::metrics {

class PrometheusMetrics final : public CallObserver,
                                public redis::RedisEvents,
                                public store::SweepObserver {
 public:
  // Creates the metrics and serves them on `listen` ("HOST:PORT"; port 0
  // picks a free one, see port()). UNAVAILABLE naming the address if it
  // cannot listen there (port taken, host not local).
  static absl::StatusOr<std::unique_ptr<PrometheusMetrics>> Start(const std::string& listen,
                                                                  const std::string& version);
  ~PrometheusMetrics() override;

  // The TCP port the endpoint listens on.
  int port() const { return port_; }

  // CallObserver
  void OnCallDone(const CallRecord& call) override;
  // redis::RedisEvents
  redis::RedisNodeEvents* ForNode(std::string_view node) override;
  // store::SweepObserver
  void OnSweep(int generations, int deletions, bool ok) override;

 private:
  struct MethodMetrics;
  class NodeMetrics;

  explicit PrometheusMetrics(const std::string& version);
  MethodMetrics& ForMethod(std::string_view method);

  std::shared_ptr<prometheus::Registry> registry_;
  // Families live in registry_; these point into it.
  prometheus::Family<prometheus::Counter>* rpc_calls_;
  prometheus::Family<prometheus::Histogram>* rpc_latency_;
  prometheus::Family<prometheus::Counter>* rpc_bytes_received_;
  prometheus::Family<prometheus::Counter>* rpc_bytes_sent_;
  prometheus::Family<prometheus::Counter>* redis_commands_;
  prometheus::Family<prometheus::Counter>* redis_errors_;
  prometheus::Family<prometheus::Counter>* redis_connects_;
  prometheus::Family<prometheus::Gauge>* redis_connections_;
  prometheus::Family<prometheus::Gauge>* redis_up_;
  prometheus::Family<prometheus::Counter>* redis_script_loads_;
  prometheus::Counter* sweeps_ok_;
  prometheus::Counter* sweeps_failed_;
  prometheus::Counter* swept_generations_;
  prometheus::Counter* swept_deletions_;

  std::mutex mu_;  // guards the two maps (the metrics themselves are atomic)
  std::map<std::string, std::unique_ptr<MethodMetrics>, std::less<>> methods_;
  std::map<std::string, std::unique_ptr<NodeMetrics>, std::less<>> nodes_;

  // Read at each scrape, not reported: the Redis reply pool's kept bytes.
  std::shared_ptr<prometheus::Collectable> reply_pool_;
  // Last: destroyed first, so no scrape runs while the rest goes away.
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tdstore::metrics

#endif  // TDSTORE_SERVER_METRICS_PROMETHEUS_METRICS_H_
