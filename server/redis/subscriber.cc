#include "server/redis/subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "common/str_cat.h"

namespace tdstore::redis {
namespace {

// A pushed message is ["message", channel, payload]; the confirmation of
// SUBSCRIBE is ["subscribe", channel, count]; the answer to PING in
// subscribe mode is ["pong", ""].
std::string_view KindOf(const Reply& reply) {
  if (!reply.is_array() || reply.size() == 0) return {};
  return reply[0].str();
}

}  // namespace

Subscriber::Subscriber(RedisClient* redis, std::string channel, Listener* listener,
                       Options options)
    : redis_(redis), channel_(std::move(channel)), listener_(listener), options_(options) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Subscriber::~Subscriber() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Subscriber::Start() {
  if (thread_.joinable() || stop_.load()) return;
  thread_ = std::thread([this] { Run(); });
}

void Subscriber::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void Subscriber::Stop() {
  stop_.store(true);
  Wake();
  if (thread_.joinable()) thread_.join();
}

void Subscriber::Pause(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!stop_.load()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{wake_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) > 0) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof n);
    }
    listener_->OnIdle();
  }
}

void Subscriber::Run() {
  std::chrono::milliseconds backoff = options_.reconnect_backoff;
  while (!stop_.load()) {
    const auto started = std::chrono::steady_clock::now();
    absl::Status ended = Session();
    if (stop_.load()) break;
    listener_->OnLost(ended);
    // A session that lasted is a node that went away: retry at once with
    // the short backoff. One that failed at once backs off further.
    if (std::chrono::steady_clock::now() - started > options_.ping_every) {
      backoff = options_.reconnect_backoff;
    } else {
      backoff = std::min(backoff * 2, options_.reconnect_backoff * 8);
    }
    Pause(backoff);
  }
}

absl::Status Subscriber::Session() {
  auto conn = redis_->ConnectForSubscribe();
  if (!conn.ok()) return conn.status();
  Connection& c = **conn;
  const std::string_view subscribe[] = {"SUBSCRIBE", channel_};
  if (auto s = c.Append(subscribe); !s.ok()) return s;

  bool subscribed = false;
  bool ping_sent = false;
  auto last_heard = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    // Everything Redis has sent, then the owner's queued work.
    auto pushed = c.NextPushed(options_.ping_every, wake_fd_);
    if (!pushed.ok()) return pushed.status();
    while (pushed->has_value()) {
      const Reply& reply = **pushed;
      last_heard = std::chrono::steady_clock::now();
      ping_sent = false;
      if (reply.is_error()) {
        return absl::UnavailableError(StrCat("SUBSCRIBE ", channel_, ": ", reply.str()));
      }
      std::string_view kind = KindOf(reply);
      if (kind == "message" && reply.size() == 3 && subscribed) {
        listener_->OnMessage(reply[2].str());
      } else if (kind == "subscribe" && !subscribed) {
        subscribed = true;
        listener_->OnSubscribed();
      }
      pushed = c.NextPushed(std::chrono::milliseconds(0), -1);
      if (!pushed.ok()) return pushed.status();
    }
    uint64_t n;
    (void)!read(wake_fd_, &n, sizeof n);  // non-blocking: clears a Wake()
    listener_->OnIdle();

    const auto silent = std::chrono::steady_clock::now() - last_heard;
    if (silent >= 2 * options_.ping_every && ping_sent) {
      return absl::UnavailableError(StrCat("the Redis subscription to ", channel_,
                                           " stopped answering PING"));
    }
    if (silent >= options_.ping_every && !ping_sent) {
      const std::string_view ping[] = {"PING"};
      if (auto s = c.Append(ping); !s.ok()) return s;
      ping_sent = true;
    }
  }
  return absl::OkStatus();
}

}  // namespace tdstore::redis
