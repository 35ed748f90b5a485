// The plan pieces of an indexed call (server/redis_store/indexed_blocks.h),
// on random runs against plain references: KeyOffsetOrder is a stable sort
// by (key, offset), whether it merges the runs' ascending stretches or
// sorts them; PlanWrite's ranges cover its runs exactly, joined only where
// they touch; RangeBytes' bytes are the runs' bytes back to back.
#include "server/redis_store/indexed_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace tdstore::store {
namespace {

// What KeyOffsetOrder promises, said the slow way.
std::vector<size_t> StableByKeyAndOffset(const std::vector<BlockWork::Run>& runs) {
  std::vector<size_t> order(runs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(runs[a].key, runs[a].offset_in_part) <
           std::tie(runs[b].key, runs[b].offset_in_part);
  });
  return order;
}

// `stretches` ascending stretches of runs (as a write's leaves come, each
// in result order), with ties between and within them; `far` puts some
// offsets past 2^40, where the packed key does not reach.
std::vector<BlockWork::Run> RandomRuns(std::mt19937_64& rng, int stretches, bool far) {
  std::vector<BlockWork::Run> runs;
  const int keys = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int s = 0; s < stretches; ++s) {
    const int n = std::uniform_int_distribution<int>(0, 60)(rng);
    int key = std::uniform_int_distribution<int>(1, keys)(rng);
    int64_t offset = std::uniform_int_distribution<int64_t>(0, 50)(rng);
    if (far && rng() % 3 == 0) offset += int64_t{1} << 41;
    for (int i = 0; i < n; ++i) {
      runs.push_back({static_cast<size_t>(s % 3), key, offset, 1 + static_cast<int64_t>(rng() % 8),
                      static_cast<int64_t>(runs.size())});
      if (rng() % 5 == 0 && key < keys) {
        ++key;
        offset = static_cast<int64_t>(rng() % 20);
      } else {
        offset += static_cast<int64_t>(rng() % 4);  // 0: a tie
      }
    }
  }
  return runs;
}

TEST(KeyOffsetOrder, IsAStableSortByKeyAndOffsetWhetherItMergesOrSorts) {
  std::mt19937_64 rng(33);
  // 1 to 16 stretches are merged, more are sorted; shuffled runs are as
  // many stretches as they happen to make.
  for (int stretches : {0, 1, 2, 3, 5, 15, 16, 17, 40}) {
    for (int round = 0; round < 200; ++round) {
      SCOPED_TRACE(testing::Message() << stretches << " stretches, round " << round);
      const bool far = round % 4 == 3;
      std::vector<BlockWork::Run> runs = RandomRuns(rng, stretches, far);
      ASSERT_EQ(KeyOffsetOrder(runs), StableByKeyAndOffset(runs));
      std::shuffle(runs.begin(), runs.end(), rng);
      ASSERT_EQ(KeyOffsetOrder(runs), StableByKeyAndOffset(runs));
    }
  }
}

TEST(KeyOffsetOrder, RowsOfARecordWrittenInOrderComeOutRowByRow) {
  // An extend of 5 rows of a record of three leaves (8, 4 and 2 bytes at
  // 0, 8 and 12 of a 14-byte row): the runs come leaf by leaf.
  std::vector<BlockWork::Run> runs;
  const int64_t width[] = {8, 4, 2}, at[] = {0, 8, 12};
  for (size_t leaf = 0; leaf < 3; ++leaf) {
    for (int64_t row = 0; row < 5; ++row) {
      runs.push_back({leaf, 1, row * 14 + at[leaf], width[leaf], row * width[leaf]});
    }
  }
  const std::vector<size_t> order = KeyOffsetOrder(runs);
  ASSERT_EQ(order.size(), 15u);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(runs[order[i]].offset_in_part, static_cast<int64_t>(i / 3) * 14 + at[i % 3]);
  }
}

TEST(PlanWriteAndRangeBytes, RangesJoinTouchingRunsAndCarryTheirBytesInOrder) {
  std::mt19937_64 rng(34);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    // Two leaves' values; runs cut from them at random, written to random
    // places of two keys, some touching, some overlapping.
    std::vector<std::string> leaf_bytes(2);
    for (std::string& b : leaf_bytes) {
      b.resize(400);
      for (char& c : b) c = static_cast<char>(rng());
    }
    std::vector<IndexedValue> values = {{nullptr, leaf_bytes[0]}, {nullptr, leaf_bytes[1]}};
    BlockWork work;
    work.keys = {"k1", "k2"};
    const int n = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<int64_t> result_at(2, 0);
    int64_t next_offset[2] = {0, 0};
    for (int i = 0; i < n; ++i) {
      const size_t leaf = rng() % 2;
      const int key = 1 + static_cast<int>(rng() % 2);
      const int64_t length = 1 + static_cast<int64_t>(rng() % 9);
      int64_t& at = next_offset[key - 1];
      const int gap = static_cast<int>(rng() % 4);  // 0: touches the run before
      at = gap == 3 && at > 4 ? at - 4 : at + gap;  // 3: overlaps it
      work.runs.push_back({leaf, key, at, length, result_at[leaf]});
      at += length;
      result_at[leaf] = std::min<int64_t>(result_at[leaf] + length + (rng() % 2 ? 0 : 3), 380);
    }
    const WritePlan plan = PlanWrite(work);

    // The order is every run once: key and offset order when disjoint,
    // else the index's.
    std::vector<size_t> seen = plan.order;
    std::sort(seen.begin(), seen.end());
    std::vector<size_t> all(work.runs.size());
    std::iota(all.begin(), all.end(), size_t{0});
    ASSERT_EQ(seen, all);
    if (plan.disjoint) {
      EXPECT_EQ(plan.order, StableByKeyAndOffset(work.runs));
    } else {
      EXPECT_EQ(plan.order, all);
    }

    std::deque<std::string> gathered;
    size_t expect_first = 0;
    for (const WritePlan::Range& r : plan.ranges) {
      ASSERT_EQ(r.first, expect_first);
      ASSERT_LT(r.first, r.last);
      expect_first = r.last;
      std::string want;
      int64_t offset = r.offset;
      for (size_t k = r.first; k < r.last; ++k) {
        const BlockWork::Run& run = work.runs[plan.order[k]];
        ASSERT_EQ(run.key, r.key);
        ASSERT_EQ(run.offset_in_part, offset) << "a range holds only runs that touch";
        offset += run.length;
        want += leaf_bytes[run.leaf].substr(static_cast<size_t>(run.result_offset),
                                            static_cast<size_t>(run.length));
      }
      ASSERT_EQ(offset, r.offset + r.length);
      ASSERT_EQ(RangeBytes(work, plan, values, r.first, r.last, gathered), want);
    }
    ASSERT_EQ(expect_first, plan.order.size());
    // Ranges end where the next run does not touch them.
    for (size_t i = 1; i < plan.ranges.size(); ++i) {
      const WritePlan::Range& a = plan.ranges[i - 1];
      const WritePlan::Range& b = plan.ranges[i];
      EXPECT_FALSE(a.key == b.key && a.offset + a.length == b.offset) << "range " << i;
    }
  }
}

}  // namespace
}  // namespace tdstore::store
