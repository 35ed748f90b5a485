// The congestion control of a TCP connection to a Redis on this host.
//
// Why tdstored picks it: on a host whose default is BBR (Debian 12 offers
// it; many clouds set it), a TCP socket paces what it sends, with a timer,
// at the rate BBR estimates. Over loopback nothing is congested and no
// queue is shared, yet the pacing stays: a 2.5 MB SET from one socket took
// 0.69–0.75 ms with BBR against 0.37–0.41 ms with reno, and the sender
// spent 0.61–0.69 ms of CPU against 0.29–0.34 (docs/benchmarks.md, *The
// congestion control of a loopback connection*). Without loss, reno (which
// Linux always lets an unprivileged process choose) sends as fast as the
// receiver reads. A connection to another host keeps the host's choice: on
// a real network that choice is the operator's.
//
// Safe to call from any thread.
#ifndef TDSTORE_SERVER_REDIS_LOCAL_TCP_H_
#define TDSTORE_SERVER_REDIS_LOCAL_TCP_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tdstore::redis {

// What tdstored sends with to a Redis on this host, unless told otherwise
// (ConnectOptions::local_congestion, --redis-local-congestion).
inline constexpr char kDefaultLocalCongestion[] = "reno";

// Whether the connected TCP socket `fd` talks to this host: its peer is a
// loopback address (127.0.0.0/8, ::1, or either mapped into IPv6) or the
// socket's own address. False for anything else, a unix socket included.
bool PeerIsThisHost(int fd);

// Sets TCP_CONGESTION of `fd` to `name`. INVALID_ARGUMENT naming `name` and
// the kernel's reason (an algorithm not built in, or one an unprivileged
// process may not choose: net.ipv4.tcp_allowed_congestion_control).
absl::Status SetCongestionControl(int fd, const std::string& name);

// TCP_CONGESTION of `fd`, as the kernel reports it.
absl::StatusOr<std::string> CongestionControl(int fd);

// Whether this process may give a TCP socket `name` (tried on a socket of
// its own, never connected): the start-up check of
// --redis-local-congestion, so that a name the kernel refuses is an error
// at launch rather than a setting silently not applied.
absl::Status CheckCongestionControl(const std::string& name);

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_LOCAL_TCP_H_
