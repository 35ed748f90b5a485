// One Redis channel subscription kept alive on a thread of its own.
//
// Redis pub/sub delivers a message only to connections subscribed at the
// moment it is published, at most once. So the subscriber tells its owner
// exactly when messages may have been missed: OnLost when a subscription
// breaks (the connection failed or stopped answering PINGs) and
// OnSubscribed each time one is confirmed again. Between an OnSubscribed
// and the next OnLost, every message published on the channel is handed
// to OnMessage, in the order Redis sent it.
//
// A cluster delivers a PUBLISH to every node, so the subscriber connects
// to any node that answers (RedisClient::ConnectForSubscribe), and
// reconnects elsewhere, with backoff, when that node goes away.
//
// Threads: every callback runs on the subscriber's thread, one at a time.
// Start, Wake and Stop may be called from any thread.
#ifndef TDSTORE_SERVER_REDIS_SUBSCRIBER_H_
#define TDSTORE_SERVER_REDIS_SUBSCRIBER_H_

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "server/redis/redis_client.h"

namespace tdstore::redis {

class Subscriber {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // The subscription is (again) confirmed: messages published from now
    // on arrive; earlier ones may have been missed.
    virtual void OnSubscribed() = 0;
    // The subscription broke: messages may be missed until OnSubscribed.
    virtual void OnLost(const absl::Status& why) = 0;
    virtual void OnMessage(std::string_view message) = 0;
    // After each batch of messages, and soon after Wake(): the owner's
    // chance to do queued work on this thread.
    virtual void OnIdle() = 0;
  };

  struct Options {
    // Silence this long on the connection sends a PING; no answer within
    // another `ping_every` means the connection is dead.
    std::chrono::milliseconds ping_every{5000};
    // Between connect attempts when no node answers (doubled up to 8x).
    std::chrono::milliseconds reconnect_backoff{100};
  };

  // `redis` and `listener` must outlive the subscriber.
  Subscriber(RedisClient* redis, std::string channel, Listener* listener, Options options);
  Subscriber(RedisClient* redis, std::string channel, Listener* listener)
      : Subscriber(redis, std::move(channel), listener, Options{}) {}
  ~Subscriber();  // Stop()
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Starts the thread (once).
  void Start();
  // Makes the thread call OnIdle soon.
  void Wake();
  // Ends the subscription and joins the thread; no callback runs after it
  // returns. Idempotent.
  void Stop();

 private:
  void Run();
  // One connection's life: subscribe, then hand on messages until it fails
  // or Stop. Returns why it ended.
  absl::Status Session();
  // Waits `d` or until woken; OnIdle is called either way.
  void Pause(std::chrono::milliseconds d);

  RedisClient* const redis_;
  const std::string channel_;
  Listener* const listener_;
  const Options options_;
  int wake_fd_ = -1;  // an eventfd: Wake() and Stop() write it
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_SUBSCRIBER_H_
