#include "client/core/src/address.h"

namespace tdstore::core {

std::string UnixSocketPath(const std::string& address) {
  if (address.rfind("unix:", 0) != 0) return "";
  std::string path = address.substr(5);
  if (path.rfind("//", 0) == 0) path = path.substr(2);
  return path;
}

bool IsLoopbackTcp(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return false;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  const std::string host = address.substr(0, colon);
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" ||
         host == "ipv4:127.0.0.1" || host == "ipv6:[::1]";
}

}  // namespace tdstore::core
