// The memory budget (server/store/memory_budget.h): leases add up to at
// most the budget, a full budget makes callers wait (bounded) and then
// refuses them naming the setting, and released leases wake waiters.
#include "server/store/memory_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace tdstore::store {
namespace {

using std::chrono::milliseconds;

bool Mentions(const absl::Status& status, const std::string& part) {
  return std::string(status.message()).find(part) != std::string::npos;
}

TEST(MemoryBudget, LeasesAddUpAndReturnTheirBytes) {
  MemoryBudget budget(100, milliseconds(0));
  {
    auto a = budget.Acquire(60, "a");
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = budget.Acquire(40, "b");
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(budget.used_bytes(), 100);
    auto c = budget.Acquire(1, "c");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(Mentions(c.status(), "--memory-budget-bytes")) << c.status();
    EXPECT_TRUE(Mentions(c.status(), "--memory-budget-wait-ms")) << c.status();
    MemoryBudget::Lease moved = *std::move(a);
    EXPECT_EQ(budget.used_bytes(), 100);
  }
  EXPECT_EQ(budget.used_bytes(), 0);
  EXPECT_EQ(budget.peak_bytes(), 100);
}

TEST(MemoryBudget, MoreThanTheWholeBudgetIsRefusedAtOnce) {
  MemoryBudget budget(100, milliseconds(60000));
  const auto start = std::chrono::steady_clock::now();
  auto big = budget.Acquire(101, "a big call");
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(Mentions(big.status(), "more than its whole budget")) << big.status();
  MemoryBudget::Lease lease = budget.Empty();
  ASSERT_TRUE(lease.Grow(70, "part one").ok());
  absl::Status grown = lease.Grow(40, "part two");
  EXPECT_EQ(grown.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(lease.bytes(), 70);  // kept what it had
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(MemoryBudget, WaitersGetTheBytesOthersRelease) {
  MemoryBudget budget(100, milliseconds(30000));
  auto first = budget.Acquire(80, "first");
  ASSERT_TRUE(first.ok());
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto second = budget.Acquire(50, "second");
    EXPECT_TRUE(second.ok()) << second.status();
    got = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(got.load());
  first->Release();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(budget.used_bytes(), 0);
  EXPECT_LE(budget.peak_bytes(), 100);
}

TEST(MemoryBudget, ManyThreadsNeverPassTheBudget) {
  MemoryBudget budget(1000, milliseconds(30000));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto lease = budget.Acquire(100 + 37 * ((t + i) % 20), "work");
        if (!lease.ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(budget.peak_bytes(), 1000);
  EXPECT_EQ(budget.used_bytes(), 0);
}

TEST(MemoryBudget, TryAcquireTakesWhatFitsAndNeverWaits) {
  MemoryBudget budget(100, milliseconds(5000));
  auto a = budget.TryAcquire(70);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->bytes(), 70);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(budget.TryAcquire(31).has_value());
  // Refused at once, not after the 5 s wait an Acquire would make.
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_EQ(budget.used_bytes(), 70);
  auto b = budget.TryAcquire(30);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(budget.used_bytes(), 100);
  a.reset();
  b.reset();
  EXPECT_EQ(budget.used_bytes(), 0);
}

}  // namespace
}  // namespace tdstore::store
