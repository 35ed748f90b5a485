#include "tests/e2e/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace tdstore::testing {

std::string HttpGet(const std::string& url) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) {
    ADD_FAILURE() << "not an http:// URL: " << url;
    return "";
  }
  const std::string rest = url.substr(prefix.size());
  const size_t colon = rest.find(':');
  const size_t slash = rest.find('/');
  if (colon == std::string::npos || slash == std::string::npos || slash < colon) {
    ADD_FAILURE() << "expected http://HOST:PORT/PATH, got " << url;
    return "";
  }
  const std::string host = rest.substr(0, colon);
  const int port = std::stoi(rest.substr(colon + 1, slash - colon - 1));
  const std::string path = rest.substr(slash);

  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "cannot connect to " << url;
    if (fd >= 0) close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\n\r\n";
  if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    ADD_FAILURE() << "cannot send the request to " << url;
  }
  std::string response;
  char buf[8192];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) response.append(buf, n);
  close(fd);

  const size_t body = response.find("\r\n\r\n");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (body == std::string::npos || status_line.find(" 200 ") == std::string::npos) {
    ADD_FAILURE() << "GET " << url << ": " << status_line;
    return "";
  }
  return response.substr(body + 4);
}

}  // namespace tdstore::testing
