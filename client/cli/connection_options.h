// How the CLI reaches tdstored: address, bearer token and TLS, from global
// options or the environment (an option wins):
//
//   --addr ADDR            TDSTORE_ADDR        host:port or unix:///path
//   --token-file FILE      TDSTORE_TOKEN_FILE  bearer token (first line of FILE)
//                          TDSTORE_TOKEN       the token itself (environment only:
//                                              an option would show in `ps`)
//   --tls                                      TLS with the system's roots
//   --tls-ca FILE          TDSTORE_TLS_CA      TLS; tdstored's certificate must be
//                                              signed by this PEM CA
//   --tls-cert/--tls-key   TDSTORE_TLS_CERT/_KEY  client certificate (mutual TLS)
//   --tls-server-name N    TDSTORE_TLS_SERVER_NAME  name the certificate must carry
//   --retry-for SECONDS    TDSTORE_RETRY_FOR   how long UNAVAILABLE calls are
//                                              retried (default 10)
#ifndef TDSTORE_CLIENT_CLI_CONNECTION_OPTIONS_H_
#define TDSTORE_CLIENT_CLI_CONNECTION_OPTIONS_H_

#include <string>
#include <vector>

#include "client/cli/args.h"
#include "tdstore/core.h"

namespace tdstore::cli {

// The option names above (canonical, without "--"), which every command
// accepts.
const std::vector<std::string>& ConnectionOptionNames();

// tdstored's address.
std::string AddressOf(const CommandLine& line);

// ClientOptions with the token, TLS and retry settings. Throws
// tdstore::Error (INVALID_ARGUMENT) naming an unreadable file or a bad
// --retry-for; never prints a token.
ClientOptions ClientOptionsOf(const CommandLine& line);

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_CONNECTION_OPTIONS_H_
