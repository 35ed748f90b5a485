// WritesBehind (client/core/src/writes_behind.h) on its own: writes that
// are functions, no server. Order, the failure rule, the writer thread's
// own calls, the window's byte cap, the end that sends what is queued, and
// writes that join (QueuedWrite::Join; rows_behind.h's rules are tested
// against a real tdstored, tests/e2e/writes_behind_test.cc).
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

// A write that records its id, or each id it joined, when applied; it
// joins the next write if that one is `joinable` too; the write with id
// `fail` throws; `gate`, if set, is waited on first.
class IdWrite final : public QueuedWrite {
 public:
  IdWrite(int id, bool joinable, std::vector<std::vector<int>>* applied,
          std::shared_future<void> gate = {}, int fail = -1)
      : ids_{id}, joinable_(joinable), applied_(applied), gate_(std::move(gate)), fail_(fail) {}
  void Apply() override {
    if (gate_.valid()) gate_.wait();
    for (int id : ids_) {
      if (id == fail_) throw Error(StatusCode::kUnavailable, "down");
    }
    applied_->push_back(ids_);
  }
  bool Join(QueuedWrite& next) override {
    auto* other = dynamic_cast<IdWrite*>(&next);
    if (!joinable_ || other == nullptr || !other->joinable_) return false;
    ids_.insert(ids_.end(), other->ids_.begin(), other->ids_.end());
    other->ids_.clear();
    return true;
  }

 private:
  std::vector<int> ids_;
  const bool joinable_;
  std::vector<std::vector<int>>* applied_;
  std::shared_future<void> gate_;
  const int fail_;
};

TEST(WritesBehind, WritesWaitingTogetherJoinInOrderUpToOneThatDoesNot) {
  WritesBehind writes;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::vector<std::vector<int>> applied;  // the writer thread's; read after Settle
  // 0 joins nothing, so what waits behind it is all queued before the
  // thread looks for writes to join (0 holds the gate).
  ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(0, false, &applied, open), 1));
  // Queued while 0 runs: 1-3 join, 4 does not, 5-6 join each other.
  for (int id = 1; id <= 6; ++id) {
    ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(id, id != 4, &applied), 1));
  }
  gate.set_value();
  writes.Settle();
  EXPECT_EQ(applied, (std::vector<std::vector<int>>{{0}, {1, 2, 3}, {4}, {5, 6}}));
}

TEST(WritesBehind, JoinedWritesLeaveTheWindowSoTheCallerQueuesOnWhileTheyRun) {
  WritesBehind writes;
  std::promise<void> first_gate, joined_gate;
  std::shared_future<void> first = first_gate.get_future().share();
  std::shared_future<void> joined = joined_gate.get_future().share();
  std::vector<std::vector<int>> applied;
  ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(0, false, &applied, first), 1));
  // A full window behind the first: the first of them waits for
  // `joined`, and takes the rest with it.
  ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(1, true, &applied, joined), 1));
  for (int id = 2; id < WritesBehind::kMaxWrites; ++id) {
    ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(id, true, &applied), 1));
  }
  first_gate.set_value();
  // The joined call is held by its gate; the window has room again, so
  // these return without waiting for it (a deadlock otherwise: the gate
  // opens only after them).
  for (int id = WritesBehind::kMaxWrites; id < WritesBehind::kMaxWrites + 3; ++id) {
    ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(id, false, &applied), 1));
  }
  joined_gate.set_value();
  writes.Settle();
  std::vector<int> all;
  for (int id = 1; id < WritesBehind::kMaxWrites; ++id) all.push_back(id);
  ASSERT_EQ(applied.size(), 5u);
  EXPECT_EQ(applied[0], std::vector<int>{0});
  EXPECT_EQ(applied[1], all);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(applied[2 + i], std::vector<int>{WritesBehind::kMaxWrites + i});
  }
}

TEST(WritesBehind, AJoinedWriteThatFailsCountsTheWritesSentWithItAsDropped) {
  WritesBehind writes;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::vector<std::vector<int>> applied;
  ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(0, false, &applied, open), 1));
  // 1-3 join and fail (2 throws); 4 joins nothing and is not sent.
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(writes.Enqueue(
        std::make_unique<IdWrite>(id, true, &applied, std::shared_future<void>(), 2), 1));
  }
  ASSERT_TRUE(writes.Enqueue(std::make_unique<IdWrite>(4, false, &applied), 1));
  gate.set_value();
  const WriteBehindError e = SettleFailure(writes);
  EXPECT_EQ(e.code(), StatusCode::kUnavailable);
  EXPECT_EQ(e.dropped(), 3);  // 2 and 3 went with 1 and failed; 4 was not sent
  const std::string what = e.what();
  EXPECT_NE(what.find("2 write(s) queued after it went in the same call and failed with it, "
                      "and 1 write(s) queued after it were not sent"),
            std::string::npos)
      << what;
  EXPECT_EQ(applied, std::vector<std::vector<int>>{{0}});
  writes.Settle();  // thrown once
}

}  // namespace
}  // namespace tdstore::core
