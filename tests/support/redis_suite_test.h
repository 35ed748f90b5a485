// A gtest fixture base for suites that share one Redis: a TestRedis
// (standalone or cluster, from TDSTORE_TEST_BACKEND: ctest runs every test
// against both) started before the suite's first test and stopped after
// its last, and a Redis namespace per test.
//
//   class StoreTest : public RedisSuiteTest {
//     void SetUp() override { ns_ = TestNamespace("t"); ... redis_->url() ... }
//   };
#ifndef TDSTORE_TESTS_SUPPORT_REDIS_SUITE_TEST_H_
#define TDSTORE_TESTS_SUPPORT_REDIS_SUITE_TEST_H_

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "tests/support/test_redis.h"

namespace tdstore::testing {

class RedisSuiteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    redis_ = MakeTestRedis().release();
    absl::Status started = redis_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }

  // `prefix` + the running test's name: a namespace per test keeps tests
  // independent within the suite's one Redis.
  static std::string TestNamespace(std::string_view prefix) {
    return std::string(prefix) +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // The suite's Redis; null outside it.
  inline static TestRedis* redis_ = nullptr;
};

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_SUPPORT_REDIS_SUITE_TEST_H_
