#include "server/metrics/prometheus_metrics.h"

#include <chrono>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "prometheus/registry.h"
#include "server/redis/reply_objects.h"

namespace tdstore::metrics {
namespace {

// From 0.5 ms (a small unary call on loopback) to a minute (a large
// streamed leaf): about 2.5x apart.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *buckets;
}

}  // namespace

// One method's metrics, found once per call instead of by label lookups
// (Family::Add would build a new histogram each time only to drop it).
struct PrometheusMetrics::MethodMetrics {
  prometheus::Histogram* latency;
  prometheus::Counter* bytes_received;
  prometheus::Counter* bytes_sent;
  // By status code; guarded by PrometheusMetrics::mu_.
  std::map<grpc::StatusCode, prometheus::Counter*> calls;
};

// One Redis node's metrics. Every method only touches atomic metrics.
class PrometheusMetrics::NodeMetrics : public redis::RedisNodeEvents {
 public:
  NodeMetrics(PrometheusMetrics& m, const std::string& node)
      : commands_(m.redis_commands_->Add({{"node", node}})),
        errors_(m.redis_errors_->Add({{"node", node}})),
        connects_ok_(m.redis_connects_->Add({{"node", node}, {"result", "ok"}})),
        connects_failed_(m.redis_connects_->Add({{"node", node}, {"result", "error"}})),
        script_loads_(m.redis_script_loads_->Add({{"node", node}})),
        connections_(m.redis_connections_->Add({{"node", node}})),
        up_(m.redis_up_->Add({{"node", node}})) {}

  void OnConnect(bool ok) override {
    if (ok) {
      connects_ok_.Increment();
      connections_.Increment();
    } else {
      connects_failed_.Increment();
    }
    up_.Set(ok ? 1 : 0);
  }
  void OnClose() override { connections_.Decrement(); }
  void OnReply() override {
    commands_.Increment();
    up_.Set(1);
  }
  void OnTransportError() override {
    errors_.Increment();
    up_.Set(0);
  }
  void OnScriptLoad() override { script_loads_.Increment(); }

 private:
  prometheus::Counter& commands_;
  prometheus::Counter& errors_;
  prometheus::Counter& connects_ok_;
  prometheus::Counter& connects_failed_;
  prometheus::Counter& script_loads_;
  prometheus::Gauge& connections_;
  prometheus::Gauge& up_;
};

// tdstore_redis_reply_pool_kept_bytes, read when scraped: the pool is the
// process's, and reports to nobody.
class ReplyPoolCollectable final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family;
    family.name = "tdstore_redis_reply_pool_kept_bytes";
    family.help = "Bytes of freed Redis reply strings (2 MiB and more) kept mapped for reuse";
    family.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric metric;
    metric.gauge.value = static_cast<double>(redis::PoolKeptBytes());
    family.metric.push_back(std::move(metric));
    return {std::move(family)};
  }
};

PrometheusMetrics::PrometheusMetrics(const std::string& version)
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;

  BuildGauge()
      .Name("tdstore_build_info")
      .Help("Always 1; the label is the tdstored version")
      .Register(r)
      .Add({{"version", version}})
      .Set(1);
  BuildGauge()
      .Name("tdstore_start_time_seconds")
      .Help("When tdstored started, in seconds since the Unix epoch")
      .Register(r)
      .Add({})
      .Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
               .count());

  rpc_calls_ = &BuildCounter()
                    .Name("tdstore_rpc_calls_total")
                    .Help("gRPC calls finished, by method and status code")
                    .Register(r);
  rpc_latency_ = &BuildHistogram()
                      .Name("tdstore_rpc_latency_seconds")
                      .Help("Time from a call's arrival to its status, by method")
                      .Register(r);
  rpc_bytes_received_ = &BuildCounter()
                             .Name("tdstore_rpc_bytes_received_total")
                             .Help("Serialized request message bytes, by method")
                             .Register(r);
  rpc_bytes_sent_ = &BuildCounter()
                         .Name("tdstore_rpc_bytes_sent_total")
                         .Help("Serialized response message bytes, by method")
                         .Register(r);

  redis_commands_ = &BuildCounter()
                         .Name("tdstore_redis_commands_total")
                         .Help("Redis commands answered (error replies included), by node")
                         .Register(r);
  redis_errors_ =
      &BuildCounter()
           .Name("tdstore_redis_errors_total")
           .Help("Redis connections that broke (reset, timeout, protocol error), by node")
           .Register(r);
  redis_connects_ = &BuildCounter()
                         .Name("tdstore_redis_connects_total")
                         .Help("Connection attempts to Redis, by node and result (ok, error)")
                         .Register(r);
  redis_connections_ = &BuildGauge()
                            .Name("tdstore_redis_connections")
                            .Help("Open connections to Redis, by node")
                            .Register(r);
  redis_up_ = &BuildGauge()
                   .Name("tdstore_redis_up")
                   .Help("1 if the last connect or command on this node got through, else 0")
                   .Register(r);
  redis_script_loads_ = &BuildCounter()
                             .Name("tdstore_redis_script_loads_total")
                             .Help("Lua scripts loaded into Redis (start-up, and after NOSCRIPT)")
                             .Register(r);

  auto& sweeps = BuildCounter()
                     .Name("tdstore_sweeps_total")
                     .Help("Sweeper passes, by result (ok, error)")
                     .Register(r);
  sweeps_ok_ = &sweeps.Add({{"result", "ok"}});
  sweeps_failed_ = &sweeps.Add({{"result", "error"}});
  auto& swept = BuildCounter()
                    .Name("tdstore_swept_total")
                    .Help(
                        "What the sweeper removed: abandoned write generations "
                        "(kind=generation), cut-short dict deletions (kind=dict_deletion)")
                    .Register(r);
  swept_generations_ = &swept.Add({{"kind", "generation"}});
  swept_deletions_ = &swept.Add({{"kind", "dict_deletion"}});
}

PrometheusMetrics::~PrometheusMetrics() = default;

absl::StatusOr<std::unique_ptr<PrometheusMetrics>> PrometheusMetrics::Start(
    const std::string& listen, const std::string& version) {
  std::unique_ptr<PrometheusMetrics> m(new PrometheusMetrics(version));
  try {
    // One thread: a scrape takes well under a millisecond.
    m->exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception&) {
    // civetweb's message ("null context ... problem binding to port") says
    // little more than this.
    return absl::UnavailableError("--metrics-listen: cannot serve /metrics on " + listen +
                                  " (port in use, or not a local address?)");
  }
  m->exposer_->RegisterCollectable(m->registry_);
  m->reply_pool_ = std::make_shared<ReplyPoolCollectable>();
  m->exposer_->RegisterCollectable(m->reply_pool_);
  const std::vector<int> ports = m->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError("--metrics-listen: no port bound for " + listen);
  }
  m->port_ = ports.front();
  return m;
}

PrometheusMetrics::MethodMetrics& PrometheusMetrics::ForMethod(std::string_view method) {
  // Caller holds mu_.
  auto it = methods_.find(method);
  if (it != methods_.end()) return *it->second;
  const std::string name(method);
  auto m = std::make_unique<MethodMetrics>();
  m->latency = &rpc_latency_->Add({{"method", name}}, LatencyBuckets());
  m->bytes_received = &rpc_bytes_received_->Add({{"method", name}});
  m->bytes_sent = &rpc_bytes_sent_->Add({{"method", name}});
  return *methods_.emplace(name, std::move(m)).first->second;
}

void PrometheusMetrics::OnCallDone(const CallRecord& call) {
  prometheus::Counter* calls;
  MethodMetrics* m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    m = &ForMethod(call.method);
    prometheus::Counter*& c = m->calls[call.code];
    if (c == nullptr) {
      c = &rpc_calls_->Add(
          {{"method", std::string(call.method)}, {"code", StatusCodeName(call.code)}});
    }
    calls = c;
  }
  // The metrics are atomic: update them outside the lock.
  calls->Increment();
  m->latency->Observe(call.seconds);
  if (call.bytes_received > 0)
    m->bytes_received->Increment(static_cast<double>(call.bytes_received));
  if (call.bytes_sent > 0) m->bytes_sent->Increment(static_cast<double>(call.bytes_sent));
}

redis::RedisNodeEvents* PrometheusMetrics::ForNode(std::string_view node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    it = nodes_.emplace(std::string(node), std::make_unique<NodeMetrics>(*this, std::string(node)))
             .first;
  }
  return it->second.get();
}

void PrometheusMetrics::OnSweep(int generations, int deletions, bool ok) {
  (ok ? sweeps_ok_ : sweeps_failed_)->Increment();
  if (generations > 0) swept_generations_->Increment(generations);
  if (deletions > 0) swept_deletions_->Increment(deletions);
}

}  // namespace tdstore::metrics
