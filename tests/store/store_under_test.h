// The store a contract test runs against, chosen by TDSTORE_TEST_BACKEND:
// "standalone" or "cluster" (a RedisStore on a real redis-server or Redis
// Cluster, tests/support/test_redis.h), or "memory" (a MemoryStore in this
// process, no Redis). Each test gets a fresh store: its own namespace in
// the shared Redis, or a store of its own.
//
//   auto sut = MakeStoreUnderTest(options);
//   Store& store = sut->store();
#ifndef TDSTORE_TESTS_STORE_STORE_UNDER_TEST_H_
#define TDSTORE_TESTS_STORE_STORE_UNDER_TEST_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/store.h"
#include "server/store/store_options.h"

namespace tdstore::store::testing {

class StoreUnderTest {
 public:
  virtual ~StoreUnderTest() = default;
  virtual Store& store() = 0;
  // "standalone", "cluster", ...
  virtual std::string backend() const = 0;
};

// A fresh store with `options` (its namespace is made unique per call).
absl::StatusOr<std::unique_ptr<StoreUnderTest>> MakeStoreUnderTest(StoreOptions options = {});

}  // namespace tdstore::store::testing

#endif  // TDSTORE_TESTS_STORE_STORE_UNDER_TEST_H_
