#include "server/health_monitor.h"

#include <algorithm>

#include "common/str_cat.h"
#include "server/redis_store/lua_scripts.h"

namespace tdstore {

HealthMonitor::HealthMonitor(redis::RedisClient* redis,
                             grpc::HealthCheckServiceInterface* health,
                             ChangeCallback on_change, Options options)
    : redis_(redis), health_(health), on_change_(std::move(on_change)), options_(options) {}

HealthMonitor::~HealthMonitor() { Stop(); }

absl::Status HealthMonitor::Probe() {
  auto pongs = redis_->CallOnEveryMaster({"PING"});
  if (!pongs.ok()) return pongs.status();
  if (pongs->empty()) return absl::UnavailableError("no Redis master known");
  for (const redis::Reply& pong : *pongs) {
    // A master that is loading its data set answers -LOADING: not yet.
    if (pong.is_error()) return absl::UnavailableError(StrCat("Redis: ", pong.str()));
  }
  return absl::OkStatus();
}

void HealthMonitor::Apply(const absl::Status& probe) {
  bool now_healthy = probe.ok();
  std::string reason = now_healthy ? "Redis answers" : std::string(probe.message());
  if (now_healthy && (!known_ || !healthy_.load())) {
    // Back from down (or first contact): warm the script cache.
    if (absl::Status loaded = store::PreloadScripts(*redis_); !loaded.ok()) {
      reason = StrCat("Redis answers, but loading the Lua scripts failed: ", loaded.message());
    }
  }
  if (known_ && now_healthy == healthy_.load()) return;
  known_ = true;
  healthy_.store(now_healthy);
  // Both the server as a whole ("") and our service by name.
  health_->SetServingStatus(now_healthy);
  health_->SetServingStatus("tdstore.v1.TdStore", now_healthy);
  if (on_change_) on_change_(now_healthy, reason);
}

void HealthMonitor::Start() {
  Apply(Probe());
  thread_ = std::thread([this] { Run(); });
}

void HealthMonitor::Run() {
  const std::chrono::milliseconds kFirstBackoff(100);
  std::chrono::milliseconds backoff = kFirstBackoff;
  while (true) {
    std::chrono::milliseconds wait = healthy_.load() ? options_.healthy_period : backoff;
    std::string down;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, wait, [this] { return stopping_ || !down_reason_.empty(); });
      if (stopping_) return;
      down.swap(down_reason_);
    }
    // A reported death is applied as is, not probed: the restarted Redis
    // may already answer, and it still needs its scripts and a fresh
    // SERVING (after the data it lost or reloaded).
    Apply(down.empty() ? Probe() : absl::UnavailableError(down));
    backoff = healthy_.load() ? kFirstBackoff : std::min(backoff * 2, options_.max_backoff);
  }
}

void HealthMonitor::ReportDown(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    down_reason_ = reason.empty() ? "Redis went down" : reason;
  }
  wake_.notify_all();
}

void HealthMonitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  health_->Shutdown();
}

}  // namespace tdstore
