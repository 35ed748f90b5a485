// What a tdstored address (a gRPC target, as ClientOptions and the CLI take
// it) says about where tdstored runs, in one place for the rules that
// depend on it: a token may go in the clear only to this machine
// (client.cc), and a client may lend shared memory only to a daemon on
// this machine (shared_memory.cc).
#ifndef TDSTORE_CLIENT_CORE_SRC_ADDRESS_H_
#define TDSTORE_CLIENT_CORE_SRC_ADDRESS_H_

#include <string>

namespace tdstore::core {

// The socket file of a "unix:" target (gRPC's forms: unix:path,
// unix:/path, unix:///path); empty for any other target.
std::string UnixSocketPath(const std::string& address);

// A TCP target on this machine's loopback: host 127.0.0.1, localhost or
// [::1] (also with gRPC's ipv4: / ipv6: prefixes). Not a unix target.
bool IsLoopbackTcp(const std::string& address);

}  // namespace tdstore::core

#endif  // TDSTORE_CLIENT_CORE_SRC_ADDRESS_H_
