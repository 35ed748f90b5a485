// Keeps the standard gRPC health service (grpc.health.v1.Health) true to
// whether tdstored can serve: SERVING while every Redis master answers
// PING, NOT_SERVING otherwise — including when Redis is down at start-up,
// since tdstored starts anyway and serves as soon as Redis answers.
//
// It probes with backoff: every `healthy_period` while Redis answers; after
// a failure at 100 ms, doubling up to `max_backoff`, so a Redis that is
// restarting is seen again quickly without being hammered while it is down.
// On every change from unhealthy to healthy it loads the Lua scripts on
// every master (a restarted Redis has an empty script cache; calls would
// reload them on NOSCRIPT anyway, this only saves that round trip).
//
// Lives in server/ because it joins the Redis layer to gRPC's health
// service. Start/Stop from one thread; healthy() from any.
#ifndef TDSTORE_SERVER_HEALTH_MONITOR_H_
#define TDSTORE_SERVER_HEALTH_MONITOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "grpcpp/health_check_service_interface.h"
#include "server/redis/redis_client.h"

namespace tdstore {

class HealthMonitor {
 public:
  struct Options {
    std::chrono::milliseconds healthy_period{1000};
    std::chrono::milliseconds max_backoff{2000};
  };
  // Called with (healthy, reason) on every change, from the monitor thread
  // (for the log line). Must not block.
  using ChangeCallback = std::function<void(bool healthy, const std::string& reason)>;

  // `redis` and `health` must outlive the monitor.
  HealthMonitor(redis::RedisClient* redis, grpc::HealthCheckServiceInterface* health,
                ChangeCallback on_change, Options options);
  HealthMonitor(redis::RedisClient* redis, grpc::HealthCheckServiceInterface* health,
                ChangeCallback on_change)
      : HealthMonitor(redis, health, std::move(on_change), Options()) {}
  ~HealthMonitor();

  // Probes once (so the status is right before the first call arrives), then
  // keeps probing on a thread.
  void Start();
  // Turns NOT_SERVING now (from the monitor thread, with `reason` for the
  // change callback), then probes with backoff as after a failed probe.
  // For news the monitor would only notice on its next probe: the embedded
  // redis-server died. Any thread; does not block.
  void ReportDown(const std::string& reason);
  // Stops probing and marks every service NOT_SERVING (shutting down).
  void Stop();

  bool healthy() const { return healthy_.load(); }

 private:
  // One PING round over every master; OK or what failed.
  absl::Status Probe();
  void Apply(const absl::Status& probe);
  void Run();

  redis::RedisClient* const redis_;
  grpc::HealthCheckServiceInterface* const health_;
  const ChangeCallback on_change_;
  const Options options_;
  std::atomic<bool> healthy_{false};
  bool known_ = false;  // monitor thread (or Start) only
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string down_reason_;  // guarded by mu_; set by ReportDown
  std::thread thread_;
};

}  // namespace tdstore

#endif  // TDSTORE_SERVER_HEALTH_MONITOR_H_
