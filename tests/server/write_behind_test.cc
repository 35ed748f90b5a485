// WriteBehind (server/store/write_behind.h): steps run in order on one
// worker, the queue never holds more than its bound beyond one step, the
// first failure stops everything after it and is what every later call
// returns, and the destructor drops queued steps without running them.
#include "server/store/write_behind.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tdstore::store {
namespace {

using std::chrono::milliseconds;

TEST(WriteBehind, RunsEveryStepInOrderOnOneOtherThread) {
  std::mutex mu;
  std::vector<int> ran;
  std::vector<std::thread::id> threads;
  std::mt19937 rng(7);
  {
    WriteBehind behind(1000);
    for (int i = 0; i < 500; ++i) {
      const int64_t bytes = std::uniform_int_distribution<int>(0, 400)(rng);
      ASSERT_TRUE(behind
                      .Push([&, i, payload = std::string(bytes, 'x')] {
                        std::lock_guard<std::mutex> lock(mu);
                        ran.push_back(i);
                        threads.push_back(std::this_thread::get_id());
                        return absl::OkStatus();
                      },
                            bytes)
                      .ok());
    }
    ASSERT_TRUE(behind.Wait().ok());
    // Wait returned: everything ran, and its effects are visible here.
    ASSERT_EQ(ran.size(), 500u);
  }
  for (int i = 0; i < 500; ++i) EXPECT_EQ(ran[i], i);
  for (std::thread::id id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(WriteBehind, PushWaitsWhileTheQueueHoldsItsBound) {
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  WriteBehind behind(100);
  auto blocked_step = [&] {
    ++started;
    while (!release) std::this_thread::sleep_for(milliseconds(1));
    return absl::OkStatus();
  };
  ASSERT_TRUE(behind.Push(blocked_step, 60).ok());  // runs, holds the worker
  while (started == 0) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(behind.Push([] { return absl::OkStatus(); }, 60).ok());  // queued
  ASSERT_TRUE(behind.Push([] { return absl::OkStatus(); }, 40).ok());  // 100: fits
  std::atomic<bool> pushed{false};
  std::thread third([&] {
    EXPECT_TRUE(behind.Push([] { return absl::OkStatus(); }, 1).ok());
    pushed = true;
  });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(pushed) << "a Push beyond the bound returned while the queue was full";
  release = true;
  third.join();
  EXPECT_TRUE(pushed);
  EXPECT_TRUE(behind.Wait().ok());
}

TEST(WriteBehind, OneStepLargerThanTheBoundStillRuns) {
  WriteBehind behind(10);
  bool ran = false;
  ASSERT_TRUE(behind.Push([&] { ran = true; return absl::OkStatus(); }, 1000).ok());
  ASSERT_TRUE(behind.Wait().ok());
  EXPECT_TRUE(ran);
}

TEST(WriteBehind, TheFirstFailureStopsWhatFollowsAndIsReportedEverAfter) {
  std::atomic<int> ran{0};
  WriteBehind behind(1 << 20);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(behind.Push([&] { ++ran; return absl::OkStatus(); }, 1).ok());
  }
  ASSERT_TRUE(behind
                  .Push([&] {
                    ++ran;
                    return absl::UnavailableError("redis went away");
                  },
                        1)
                  .ok());
  // Queued behind the failure: dropped whether or not it was queued first.
  (void)behind.Push([&] { ran += 100; return absl::OkStatus(); }, 1);
  absl::Status waited = behind.Wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(waited.message(), "redis went away");
  absl::Status later = behind.Push([&] { ran += 1000; return absl::OkStatus(); }, 1);
  EXPECT_EQ(later.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(behind.Wait().code(), absl::StatusCode::kUnavailable);
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(ran, 4);
}

TEST(WriteBehind, DestroyingDropsQueuedStepsAndWaitsForTheRunningOne) {
  std::atomic<bool> release{false};
  std::atomic<bool> running_done{false};
  std::atomic<int> queued_ran{0};
  std::atomic<int> started{0};
  std::thread releaser;
  {
    WriteBehind behind(1 << 20);
    ASSERT_TRUE(behind
                    .Push([&] {
                      ++started;
                      while (!release) std::this_thread::sleep_for(milliseconds(1));
                      running_done = true;
                      return absl::OkStatus();
                    },
                          1)
                    .ok());
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(behind.Push([&] { ++queued_ran; return absl::OkStatus(); }, 1).ok());
    }
    while (started == 0) std::this_thread::sleep_for(milliseconds(1));
    releaser = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(100));
      release = true;
    });
  }  // joins the worker, which is inside the first step until released
  releaser.join();
  EXPECT_TRUE(running_done);
  EXPECT_EQ(queued_ran, 0);
}

}  // namespace
}  // namespace tdstore::store
