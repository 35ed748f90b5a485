#include "client/cli/connection_options.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tdstore::cli {
namespace {

constexpr char kDefaultAddress[] = "127.0.0.1:50051";

// The option's value, else the environment variable's, else "".
std::string Setting(const CommandLine& line, const std::string& option, const char* env) {
  if (auto value = line.option(option)) return *value;
  const char* from_env = env != nullptr ? std::getenv(env) : nullptr;
  return from_env != nullptr ? from_env : "";
}

std::string ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(StatusCode::kInvalidArgument, "cannot read " + what + " '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

const std::vector<std::string>& ConnectionOptionNames() {
  static const auto* names = new std::vector<std::string>{
      "addr", "token-file", "tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name",
      "retry-for"};
  return *names;
}

std::string AddressOf(const CommandLine& line) {
  std::string address = Setting(line, "addr", "TDSTORE_ADDR");
  return address.empty() ? kDefaultAddress : address;
}

ClientOptions ClientOptionsOf(const CommandLine& line) {
  ClientOptions options;
  // A person at a terminal would rather see "unavailable" after a few
  // seconds than wait out the library's 30 s retry window; a script on a
  // loaded machine may give it longer.
  options.retry_for = std::chrono::seconds(10);
  if (std::string text = Setting(line, "retry-for", "TDSTORE_RETRY_FOR"); !text.empty()) {
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(seconds >= 0) || seconds > 86400) {
      throw Error(StatusCode::kInvalidArgument,
                  "--retry-for takes seconds from 0 to 86400, not '" + text + "'");
    }
    options.retry_for = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }
  // One command, a few calls: a schema watch would be opened only to be
  // cancelled at exit, so schema questions go to tdstored.
  options.watch_schemas = false;
  if (std::string file = Setting(line, "token-file", "TDSTORE_TOKEN_FILE"); !file.empty()) {
    std::string token = ReadFile(file, "token file");
    token = token.substr(0, token.find_first_of("\r\n"));
    options.token = token;
  } else if (const char* token = std::getenv("TDSTORE_TOKEN"); token != nullptr) {
    options.token = token;
  }
  const std::string ca = Setting(line, "tls-ca", "TDSTORE_TLS_CA");
  const std::string cert = Setting(line, "tls-cert", "TDSTORE_TLS_CERT");
  const std::string key = Setting(line, "tls-key", "TDSTORE_TLS_KEY");
  options.tls = line.option("tls").has_value() || !ca.empty() || !cert.empty();
  if (!ca.empty()) options.tls_root_ca_pem = ReadFile(ca, "TLS CA file");
  if (!cert.empty()) options.tls_client_cert_pem = ReadFile(cert, "TLS certificate file");
  if (!key.empty()) options.tls_client_key_pem = ReadFile(key, "TLS key file");
  options.tls_server_name = Setting(line, "tls-server-name", "TDSTORE_TLS_SERVER_NAME");
  return options;
}

}  // namespace tdstore::cli
