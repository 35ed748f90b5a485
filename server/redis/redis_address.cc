// Parsing of redis:// and unix:// URLs.
//
// Error messages name the part of the URL that is wrong but never echo the
// URL itself: it may carry a password.
#include "server/redis/redis_address.h"

#include <charconv>
#include <string>

#include "absl/status/status.h"

namespace tdstore::redis {
namespace {

constexpr std::string_view kRedisScheme = "redis://";
constexpr std::string_view kUnixScheme = "unix://";

absl::Status Invalid(std::string_view why) {
  return absl::InvalidArgumentError("invalid Redis URL: " + std::string(why));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes. `what` names the field for the error message; the
// field's value is never repeated.
absl::StatusOr<std::string> PercentDecode(std::string_view in, std::string_view what) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) {
      return Invalid("truncated percent-escape in " + std::string(what));
    }
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return Invalid("bad percent-escape in " + std::string(what));
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// A non-negative decimal integer no larger than `max`, nothing else.
bool ParseNumber(std::string_view text, int max, int* out) {
  if (text.empty()) return false;
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > max) {
    return false;
  }
  *out = value;
  return true;
}

absl::Status ParseDb(std::string_view text, RedisAddress* address) {
  // Redis' default is 16 databases; larger ones are configurable, so only
  // reject what cannot be a database index at all.
  if (!ParseNumber(text, 1 << 30, &address->db)) return Invalid("db is not a number");
  return absl::OkStatus();
}

// "user:password", ":password" -> address->user / password (decoded).
absl::Status ParseUserInfo(std::string_view userinfo, RedisAddress* address) {
  const size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    // A bare "user@" has no password to send with AUTH.
    return Invalid("credentials must be user:password or :password");
  }
  auto user = PercentDecode(userinfo.substr(0, colon), "user");
  if (!user.ok()) return user.status();
  auto password = PercentDecode(userinfo.substr(colon + 1), "password");
  if (!password.ok()) return password.status();
  if (password->empty()) return Invalid("empty password");
  address->user = *std::move(user);
  address->password = *std::move(password);
  return absl::OkStatus();
}

// host:port, [v6]:port, or host alone (port 6379).
absl::Status ParseHostPort(std::string_view hostport, RedisAddress* address) {
  std::string_view host = hostport;
  std::string_view port;
  if (!hostport.empty() && hostport.front() == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return Invalid("unterminated [ in host");
    host = hostport.substr(1, close - 1);
    std::string_view rest = hostport.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Invalid("junk after ] in host");
      port = rest.substr(1);
      if (port.empty()) return Invalid("empty port");
    }
  } else {
    const size_t colon = hostport.rfind(':');
    if (colon != std::string_view::npos) {
      host = hostport.substr(0, colon);
      port = hostport.substr(colon + 1);
      if (port.empty()) return Invalid("empty port");
      if (host.find(':') != std::string_view::npos) {
        return Invalid("IPv6 hosts must be written in brackets");
      }
    }
  }
  if (host.empty()) return Invalid("empty host");
  address->host = std::string(host);
  if (!port.empty() && (!ParseNumber(port, 65535, &address->port) || address->port == 0)) {
    // The port text is not repeated: in "redis://user:secret" (host
    // forgotten) it would be the password.
    return Invalid("the port is not a number in 1..65535");
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisAddress> ParseTcpUrl(std::string_view rest) {
  RedisAddress address;
  address.kind = RedisAddress::Kind::kTcp;
  // The credentials end at the *last* '@': an unescaped '@', '/' or '?' in a
  // password then still parses, since host, port and db cannot contain '@'.
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    if (absl::Status s = ParseUserInfo(rest.substr(0, at), &address); !s.ok()) return s;
    rest = rest.substr(at + 1);
  }
  const size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  if (hostport.find('?') != std::string_view::npos) {
    return Invalid("query parameters are not supported in redis:// URLs");
  }
  if (absl::Status s = ParseHostPort(hostport, &address); !s.ok()) return s;
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    // "redis://host:port/" is db 0.
    if (!db.empty()) {
      if (absl::Status s = ParseDb(db, &address); !s.ok()) return s;
    }
  }
  return address;
}

absl::StatusOr<RedisAddress> ParseUnixUrl(std::string_view rest) {
  RedisAddress address;
  address.kind = RedisAddress::Kind::kUnix;
  const size_t question = rest.find('?');
  std::string_view path = rest.substr(0, question);
  if (path.empty() || path.front() != '/') {
    return Invalid("unix:// needs an absolute socket path (unix:///path/redis.sock)");
  }
  address.path = std::string(path);
  if (question != std::string_view::npos) {
    std::string_view query = rest.substr(question + 1);
    constexpr std::string_view kDb = "db=";
    if (query.substr(0, kDb.size()) != kDb) {
      return Invalid("the only query parameter of unix:// URLs is db=N");
    }
    if (absl::Status s = ParseDb(query.substr(kDb.size()), &address); !s.ok()) return s;
  }
  return address;
}

}  // namespace

std::string RedisAddress::Redacted() const {
  std::string credentials;
  if (!user.empty() || !password.empty()) {
    credentials = user + (password.empty() ? "" : ":***") + "@";
  }
  if (kind == Kind::kUnix) {
    std::string out = "unix://" + credentials + path;
    if (db != 0) out += "?db=" + std::to_string(db);
    return out;
  }
  const bool v6 = host.find(':') != std::string::npos;
  std::string out = "redis://" + credentials + (v6 ? "[" + host + "]" : host) + ":" +
                    std::to_string(port);
  if (db != 0) out += "/" + std::to_string(db);
  return out;
}

absl::StatusOr<RedisAddress> ParseRedisUrl(std::string_view url) {
  if (url.substr(0, kRedisScheme.size()) == kRedisScheme) {
    return ParseTcpUrl(url.substr(kRedisScheme.size()));
  }
  if (url.substr(0, kUnixScheme.size()) == kUnixScheme) {
    return ParseUnixUrl(url.substr(kUnixScheme.size()));
  }
  if (url.substr(0, 9) == "rediss://") {
    return Invalid("rediss:// (TLS) is not supported: hiredis 0.14 has no TLS");
  }
  return Invalid("expected redis://host:port[/db] or unix:///path/redis.sock[?db=N]");
}

}  // namespace tdstore::redis

namespace tdstore::redis {

namespace {
constexpr std::string_view kClusterScheme = "redis-cluster://";
}  // namespace

bool IsClusterUrl(std::string_view url) {
  return url.substr(0, kClusterScheme.size()) == kClusterScheme;
}

absl::StatusOr<std::vector<RedisAddress>> ParseClusterUrl(std::string_view url) {
  if (!IsClusterUrl(url)) {
    return absl::InvalidArgumentError("invalid Redis Cluster URL: expected redis-cluster://");
  }
  std::string_view rest = url.substr(kClusterScheme.size());
  // Credentials end at the last '@', as in ParseRedisUrl.
  std::string credentials;
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    credentials = std::string(rest.substr(0, at + 1));
    rest = rest.substr(at + 1);
  }
  std::vector<RedisAddress> seeds;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view host = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (host.empty()) return absl::InvalidArgumentError("invalid Redis Cluster URL: empty seed");
    if (host.find('/') != std::string_view::npos) {
      return absl::InvalidArgumentError(
          "invalid Redis Cluster URL: a cluster has no database number");
    }
    auto address = ParseRedisUrl("redis://" + credentials + std::string(host));
    if (!address.ok()) return address.status();
    seeds.push_back(*std::move(address));
  }
  if (seeds.empty()) return absl::InvalidArgumentError("invalid Redis Cluster URL: no seed node");
  return seeds;
}

}  // namespace tdstore::redis
