// The daemon most e2e tests share: one redis-server and one tdstored
// (TCP and unix socket), started once for the whole e2e_test binary —
// torch-linked binaries and daemons are slow to start. Tests keep out of
// each other's way by using their own dict names (UniqueDictName).
//
// Tests that need a daemon of their own (Redis down, restarts) start one
// with DaemonProcess.
#ifndef TDSTORE_TESTS_E2E_E2E_ENV_H_
#define TDSTORE_TESTS_E2E_E2E_ENV_H_

#include <map>
#include <string>
#include <vector>

#include "tests/support/daemon_process.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_redis.h"

namespace tdstore::testing {

// Of the shared daemon: "127.0.0.1:PORT" and "unix:///.../td.sock".
const std::string& DaemonAddress();
const std::string& DaemonUnixAddress();
// The shared daemon's Redis: standalone or cluster (TDSTORE_TEST_BACKEND).
TestRedis& SharedRedis();
// The ports of its redis-server processes (every node of a cluster), for
// commands one node at a time (CLIENT KILL, CLIENT PAUSE).
std::vector<int> SharedRedisPorts();

// Every Redis key of a namespace of SharedRedis() with its content (its
// type, and its value, fields or members in a fixed order): equal
// snapshots mean equal state (a refused call wrote nothing).
std::map<std::string, std::string> NamespaceSnapshot(const std::string& ns);

// A dict name no other test uses: "<suite>.<test>.<n>", valid for tdstore.
std::string UniqueDictName();

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_E2E_ENV_H_
