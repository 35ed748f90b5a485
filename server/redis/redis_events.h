// What happens on the wire to Redis, for whoever counts it (tdstored's
// metrics, server/metrics/). server/redis/ only reports; it knows nothing of
// Prometheus.
//
// Give a RedisEvents in ConnectOptions::events; every Connection opened with
// those options asks it once, at connect time, for the RedisNodeEvents of its
// node and reports to that from then on:
//
//   OnConnect(ok)      each connect attempt (TCP/unix connect plus AUTH,
//                      SELECT or PING); false: it failed
//   OnClose()          a connection that OnConnect(true) reported was closed
//   OnReply()          a command's reply arrived (error replies included:
//                      they are Redis answering); pipelined commands count
//                      one each
//   OnTransportError() a connection broke: reset, refused write, timeout,
//                      protocol error (once per connection)
//   OnScriptLoad()     a SCRIPT LOAD succeeded: the start-up preload, or a
//                      reload after NOSCRIPT (Redis restarted, failover to a
//                      master without our scripts, SCRIPT FLUSH)
//
// A node is named "host:port" or, for a unix socket, its path: never with a
// user or password.
//
// Threads: connections of many threads report at once, so implementations
// must be thread-safe. Both objects must outlive every Connection (and so
// every RedisClient) that uses them.
#ifndef TDSTORE_SERVER_REDIS_REDIS_EVENTS_H_
#define TDSTORE_SERVER_REDIS_REDIS_EVENTS_H_

#include <string_view>

namespace tdstore::redis {

class RedisNodeEvents {
 public:
  virtual ~RedisNodeEvents() = default;
  virtual void OnConnect(bool /*ok*/) {}
  virtual void OnClose() {}
  virtual void OnReply() {}
  virtual void OnTransportError() {}
  virtual void OnScriptLoad() {}
};

class RedisEvents {
 public:
  virtual ~RedisEvents() = default;
  // The sink for one node. Returns the same object for the same name each
  // time; it lives as long as this RedisEvents. Never null.
  virtual RedisNodeEvents* ForNode(std::string_view node) = 0;
};

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_REDIS_EVENTS_H_
