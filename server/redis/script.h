// Lua scripts that tdstored runs inside Redis.
//
// Script bodies live as .lua files in server/lua/ and are embedded in the
// binary at build time (see server/CMakeLists.txt). Each is identified by its
// SHA1, computed locally, so EVALSHA needs no round trip to learn it; a
// server that does not know the script answers NOSCRIPT and the client loads
// it (SCRIPT LOAD) and retries once.
//
// Every script touches keys of a single hash slot only.
#ifndef TDSTORE_SERVER_REDIS_SCRIPT_H_
#define TDSTORE_SERVER_REDIS_SCRIPT_H_

#include <string>
#include <string_view>

namespace tdstore::redis {

class Script {
 public:
  Script(std::string name, std::string body);

  const std::string& name() const { return name_; }
  const std::string& body() const { return body_; }
  // Lower-case hex SHA1 of body(), as Redis computes it.
  const std::string& sha1() const { return sha1_; }

 private:
  std::string name_;
  std::string body_;
  std::string sha1_;
};

// Lower-case hex SHA1 of `data` (FIPS 180-4). Exposed for tests.
std::string Sha1Hex(std::string_view data);

}  // namespace tdstore::redis

#endif  // TDSTORE_SERVER_REDIS_SCRIPT_H_
