// WritesBehind (client/core/src/writes_behind.h) on its own: writes that
// are functions, no server. Order, the failure rule, the writer thread's
// own calls, the window's byte cap, and the end that sends what is queued.
#include "client/core/src/writes_behind.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tdstore::core {
namespace {

// The failure Settle throws; a test failure if it throws none.
WriteBehindError SettleFailure(WritesBehind& writes) {
  try {
    writes.Settle();
  } catch (const WriteBehindError& e) {
    return e;
  }
  ADD_FAILURE() << "Settle did not throw";
  return WriteBehindError(StatusCode::kOk, "none", 0);
}

TEST(WritesBehind, RunInOrderOnAThreadOfTheirOwnAndSettleWaitsForAll) {
  WritesBehind writes;
  std::vector<int> done;  // touched by the writer thread only, read after Settle
  std::vector<std::thread::id> threads;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(writes.Enqueue(
        [&, i] {
          done.push_back(i);
          threads.push_back(std::this_thread::get_id());
        },
        100));
  }
  writes.Settle();
  ASSERT_EQ(done.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(done[i], i);
  for (const auto& id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(WritesBehind, AFailureIsThrownOnceAndTheWritesQueuedAfterItAreDropped) {
  WritesBehind writes;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::vector<int> done;
  // The first write waits for the gate, so the failing second and the two
  // after it are all queued before it can fail.
  ASSERT_TRUE(writes.Enqueue([&] { open.wait(); done.push_back(0); }, 1));
  ASSERT_TRUE(writes.Enqueue([] { throw Error(StatusCode::kNotFound, "gone"); }, 1));
  ASSERT_TRUE(writes.Enqueue([&] { done.push_back(2); }, 1));
  ASSERT_TRUE(writes.Enqueue([&] { done.push_back(3); }, 1));
  gate.set_value();
  const WriteBehindError e = SettleFailure(writes);
  EXPECT_EQ(e.code(), StatusCode::kNotFound);
  EXPECT_EQ(e.dropped(), 2);
  EXPECT_NE(std::string(e.what()).find("gone"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("2 write(s) queued after it were not sent"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(done, std::vector<int>{0});
  writes.Settle();  // thrown once
  // The queue goes on.
  ASSERT_TRUE(writes.Enqueue([&] { done.push_back(4); }, 1));
  writes.Settle();
  EXPECT_EQ(done, (std::vector<int>{0, 4}));
}

TEST(WritesBehind, AFailureIsThrownByTheNextEnqueueWhichQueuesNothing) {
  WritesBehind writes;
  ASSERT_TRUE(writes.Enqueue([] { throw Error(StatusCode::kUnavailable, "down"); }, 1));
  bool ran = false;
  // Either this Enqueue meets the failure (throws, queues nothing) or it
  // queued before the failure (then dropped with it): never ran.
  bool thrown = false;
  try {
    writes.Enqueue([&] { ran = true; }, 1);
  } catch (const Error& e) {
    thrown = true;
    EXPECT_EQ(e.code(), StatusCode::kUnavailable);
  }
  if (!thrown) {
    const WriteBehindError e = SettleFailure(writes);
    EXPECT_EQ(e.code(), StatusCode::kUnavailable);
    EXPECT_EQ(e.dropped(), 1);
  }
  writes.Settle();
  EXPECT_FALSE(ran);
}

TEST(WritesBehind, WhatAWriteThrowsThatIsNoErrorIsKeptToo) {
  WritesBehind writes;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  ASSERT_TRUE(writes.Enqueue(
      [open] {
        open.wait();
        throw std::runtime_error("boom");
      },
      1));
  ASSERT_TRUE(writes.Enqueue([] { throw 42; }, 1));  // dropped with the first failure
  gate.set_value();
  const WriteBehindError boom = SettleFailure(writes);
  EXPECT_EQ(boom.code(), StatusCode::kInternal);
  EXPECT_NE(std::string(boom.what()).find("boom"), std::string::npos) << boom.what();
  ASSERT_TRUE(writes.Enqueue([] { throw 42; }, 1));
  EXPECT_EQ(SettleFailure(writes).code(), StatusCode::kInternal);
}

TEST(WritesBehind, TheWriterThreadsOwnCallsNeitherWaitNorQueue) {
  WritesBehind writes;
  bool settled = false, queued = true;
  ASSERT_TRUE(writes.Enqueue(
      [&] {
        writes.Settle();  // would wait for itself
        settled = true;
        queued = writes.Enqueue([] {}, 1);
      },
      1));
  writes.Settle();
  EXPECT_TRUE(settled);
  EXPECT_FALSE(queued);
}

TEST(WritesBehind, AWritePastTheByteCapIsNotQueued) {
  WritesBehind writes;
  EXPECT_FALSE(writes.Enqueue([] {}, WritesBehind::kMaxBytes + 1));
  EXPECT_TRUE(writes.Enqueue([] {}, WritesBehind::kMaxBytes));
  writes.Settle();
}

TEST(WritesBehind, ItsEndRunsWhatIsQueued) {
  auto done = std::make_shared<std::vector<int>>();
  {
    WritesBehind writes;
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(writes.Enqueue([done, i] { done->push_back(i); }, 1));
  }
  ASSERT_EQ(done->size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ((*done)[i], i);
}

}  // namespace
}  // namespace tdstore::core
