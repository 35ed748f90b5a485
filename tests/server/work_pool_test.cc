// WorkPool (server/service/work_pool.h): every job runs, jobs that block
// each get a thread of their own (none waits behind another), threads are
// reused once idle, and the destructor runs what is queued and waits.
#include "server/service/work_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace tdstore::service {
namespace {

// Jobs that wait for one another can only finish if each has its own
// thread: 16 of them meet at a barrier.
TEST(WorkPool, BlockingJobsRunAtOnce) {
  constexpr int kJobs = 16;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::atomic<int> done{0};
  {
    WorkPool pool;
    for (int i = 0; i < kJobs; ++i) {
      EXPECT_TRUE(pool.Run([&] {
        std::unique_lock<std::mutex> lock(mu);
        ++arrived;
        cv.notify_all();
        cv.wait(lock, [&] { return arrived == kJobs; });
        done.fetch_add(1);
      }));
    }
  }  // the destructor waits for all of them
  EXPECT_EQ(done.load(), kJobs);
}

// Jobs run one after another reuse the thread that went idle.
TEST(WorkPool, IdleThreadsAreReused) {
  std::mutex mu;
  std::set<std::thread::id> threads;
  WorkPool pool;
  std::condition_variable cv;
  for (int i = 0; i < 200; ++i) {
    bool ran = false;
    ASSERT_TRUE(pool.Run([&] {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
      ran = true;
      cv.notify_one();
    }));
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ran; });
  }
  // A job's thread may not yet be counted idle when the next one is queued
  // (it is between its job's end and its next wait), so a few may take
  // turns; never anywhere near one per job.
  EXPECT_LT(threads.size(), 20u);
}

TEST(WorkPool, DestructorRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    WorkPool pool;
    for (int i = 0; i < 1000; ++i) EXPECT_TRUE(pool.Run([&] { ran.fetch_add(1); }));
  }
  EXPECT_EQ(ran.load(), 1000);
}

}  // namespace
}  // namespace tdstore::service
