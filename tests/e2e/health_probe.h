// Test helper: asks a tdstored for its health over the standard gRPC
// health service, as a load balancer or kubelet probe would.
//
//   EXPECT_EQ(HealthOf(daemon.address()), "SERVING");
//
// Thread-safe (each call makes its own channel).
#ifndef TDSTORE_TESTS_E2E_HEALTH_PROBE_H_
#define TDSTORE_TESTS_E2E_HEALTH_PROBE_H_

#include <chrono>
#include <string>

namespace tdstore::testing {

// "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN", "UNKNOWN", or "error: <gRPC
// status>" when the call fails. `service` "" is the server as a whole.
std::string HealthOf(const std::string& address, const std::string& service = "");

// Polls HealthOf until it equals `want` or `timeout` passes; returns the
// last answer.
std::string WaitForHealth(const std::string& address, const std::string& want,
                          std::chrono::milliseconds timeout);

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_HEALTH_PROBE_H_
