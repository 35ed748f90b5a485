#include "server/redis/local_tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tdstore::redis {
namespace {

// The IPv4 address inside `a`: itself, or the one an IPv4-mapped IPv6
// address (::ffff:a.b.c.d) carries. False for any other family or address.
bool AsIpv4(const sockaddr_storage& a, in_addr* out) {
  if (a.ss_family == AF_INET) {
    *out = reinterpret_cast<const sockaddr_in&>(a).sin_addr;
    return true;
  }
  if (a.ss_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      std::memcpy(&out->s_addr, &v6.s6_addr[12], 4);
      return true;
    }
  }
  return false;
}

bool IsLoopback(const sockaddr_storage& a) {
  in_addr v4;
  if (AsIpv4(a, &v4)) return (ntohl(v4.s_addr) >> 24) == 127;
  return a.ss_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
}

bool SameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  in_addr x, y;
  if (AsIpv4(a, &x) && AsIpv4(b, &y)) return x.s_addr == y.s_addr;
  return a.ss_family == AF_INET6 && b.ss_family == AF_INET6 &&
         IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                            &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr);
}

}  // namespace

bool PeerIsThisHost(int fd) {
  sockaddr_storage peer{}, self{};
  socklen_t peer_len = sizeof(peer), self_len = sizeof(self);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
  if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) return false;
  if (IsLoopback(peer)) return true;
  // A connection to one of this host's own addresses (its LAN address, a
  // container's bridge address) is routed through loopback as well, and
  // then the socket's own address is the peer's.
  return getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
         SameAddress(peer, self);
}

absl::Status SetCongestionControl(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                 static_cast<socklen_t>(name.size())) != 0) {
    const int err = errno;
    return absl::InvalidArgumentError(
        "TCP congestion control '" + name + "': " + std::strerror(err) +
        (err == EPERM ? " (not in net.ipv4.tcp_allowed_congestion_control)"
         : err == ENOENT ? " (not in net.ipv4.tcp_available_congestion_control)"
                         : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CongestionControl(int fd) {
  char name[64] = {};
  socklen_t len = sizeof(name) - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) {
    return absl::InternalError(std::string("getsockopt(TCP_CONGESTION): ") +
                               std::strerror(errno));
  }
  return std::string(name, strnlen(name, len));
}

absl::Status CheckCongestionControl(const std::string& name) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return absl::InternalError(std::string("socket(): ") + std::strerror(errno));
  }
  absl::Status set = SetCongestionControl(fd, name);
  close(fd);
  return set;
}

}  // namespace tdstore::redis
