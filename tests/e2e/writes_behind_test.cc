// Writes that return before tdstored applies them: core::Dict::
// write_counted_behind, on a real tdstored and Redis (both back ends).
// They land in the order made and a process reads its own; what the core
// cannot check against its schema copy is written at once, with its error
// at once; a failure is thrown by the next call, once, naming the writes
// dropped after it; a client's end sends what is queued.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "client/core/src/rows_behind.h"
#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"
#include "tests/e2e/leaf_values.h"
#include "tests/support/raw_redis.h"

namespace tdstore::testing {
namespace {

constexpr int64_t kBehindRows = 64;
constexpr int64_t kBehindWidth = 3;
const char* const kRowsCounter = "rows";

// A dict of kBehindRows rows, obs [kBehindRows, kBehindWidth] f32 zeros.
core::Dict MakeBehindDict(const core::Client& client) {
  return client.create(UniqueDictName(), {kBehindRows},
                       {{"obs", DType::kFloat32, {kBehindWidth}}});
}

// obs rows at `positions`, row i of the write holding `value + i`.
struct RowsWrite {
  std::vector<int64_t> positions;
  std::vector<float> rows;
  core::Index index;
  bool one = false;  // td[position] = row: an int index, a row without its dim
  std::vector<core::LeafData> Leaves() const {
    const int64_t n = static_cast<int64_t>(positions.size());
    std::vector<int64_t> shape = {n, kBehindWidth};
    if (one) shape = {kBehindWidth};
    return {{"obs", DType::kFloat32, shape, rows.data(),
             static_cast<int64_t>(rows.size() * sizeof(float))}};
  }
};

RowsWrite MakeRowsWrite(std::vector<int64_t> positions, float value) {
  RowsWrite w;
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int64_t i = 0; i < n * kBehindWidth; ++i) w.rows.push_back(value + float(i));
  w.index = {core::IndexTerm::Positions(positions, {n})};
  w.positions = std::move(positions);
  return w;
}

RowsWrite MakeRowWrite(int64_t position, float value) {
  RowsWrite w = MakeRowsWrite({position}, value);
  w.index = {core::IndexTerm::Int(position)};
  w.one = true;
  return w;
}

// What `dict` holds once `w` is applied over `model` (the last of
// repeated positions wins, as for torch's t[idx] = v on the CPU).
void Apply(const RowsWrite& w, std::vector<float>* model) {
  for (size_t i = 0; i < w.positions.size(); ++i) {
    for (int64_t c = 0; c < kBehindWidth; ++c) {
      (*model)[w.positions[i] * kBehindWidth + c] = w.rows[i * kBehindWidth + c];
    }
  }
}

// Writes `writes` behind, each counting 1 row, while the shared Redis
// refuses writes, and says whether every one went behind. Why pause: the
// first cannot end, nor a later one fail, before all are queued, whatever
// the timing. Unpaused however this ends: a Redis left paused would stall
// the tests after this one.
bool QueuedWhileRedisIsPaused(const core::Dict& dict, std::vector<const RowsWrite*> writes) {
  struct Paused {
    std::vector<int> ports = SharedRedisPorts();
    Paused() {
      for (int port : ports) raw_redis::Command(port, {}, {"CLIENT", "PAUSE", "20000", "WRITE"});
    }
    ~Paused() {
      for (int port : ports) raw_redis::Command(port, {}, {"CLIENT", "UNPAUSE"});
    }
  } paused;
  bool all_behind = true;
  for (const RowsWrite* w : writes) {
    all_behind &= !dict.write_counted_behind(w->Leaves(), w->index, kRowsCounter, 1).has_value();
  }
  return all_behind;
}

TEST(E2eWritesBehind, LandInOrderAndTheWritingClientReadsItsOwn) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeBehindDict(client);
  std::vector<float> model(kBehindRows * kBehindWidth, 0.0f);
  std::mt19937 rng(7);
  int64_t counted = 0;
  int behind = 0;
  for (int step = 0; step < 60; ++step) {
    // Overlapping random positions (repeats too): only the order decides
    // what a row ends with.
    const bool one = step % 5 == 0;  // one row at an int index (torchrl's add)
    const int n = one ? 1 : std::uniform_int_distribution<int>(1, 12)(rng);
    std::vector<int64_t> positions;
    for (int i = 0; i < n; ++i) {
      positions.push_back(std::uniform_int_distribution<int64_t>(0, kBehindRows - 1)(rng));
    }
    auto make = [&] {
      return one ? MakeRowWrite(positions[0], float(step * 100))
                 : MakeRowsWrite(positions, float(step * 100));
    };
    RowsWrite w = make();
    std::optional<int64_t> value = dict.write_counted_behind(w.Leaves(), w.index, kRowsCounter, n);
    counted += n;
    if (value) {
      EXPECT_EQ(*value, counted);
    } else {
      ++behind;
    }
    // The bytes were copied: changing them now changes nothing written.
    std::fill(w.rows.begin(), w.rows.end(), -1.0f);
    Apply(make(), &model);
    if (step % 7 == 3) {
      // A read waits for every write behind before it.
      ASSERT_EQ(ReadLeafAs<float>(dict, "obs"), model) << "step " << step;
      ASSERT_EQ(dict.counter_get(kRowsCounter), counted);
    }
  }
  EXPECT_GT(behind, 30) << "a write the schema copy checks goes behind";
  client.settle();
  // Another client sees them all once the writer settled.
  core::Client other(DaemonAddress());
  core::Dict seen = other.open(dict.name());
  EXPECT_EQ(ReadLeafAs<float>(seen, "obs"), model);
  EXPECT_EQ(seen.counter_get(kRowsCounter), counted);
  dict.drop();
}

TEST(E2eWritesBehind, WhatTheSchemaCopyCannotCheckIsWrittenAtOnceWithItsError) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeBehindDict(client);
  RowsWrite w = MakeRowsWrite({1, 2}, 5.0f);
  // A leaf the dict lacks: written (and created) now, counted now.
  std::vector<float> other_rows = {1.0f, 2.0f};
  std::optional<int64_t> value = dict.write_counted_behind(
      {{"new", DType::kFloat32, {2}, other_rows.data(), 8}}, w.index, kRowsCounter, 2);
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(*value, 2);
  EXPECT_EQ(ReadLeafAs<float>(dict, "new", &w.index), other_rows);
  // The wrong dtype, a position out of range, a slice index, a value that
  // would broadcast: refused now, as write_counted refuses them, and
  // nothing counted.
  std::vector<double> wide(6, 1.0);
  EXPECT_EQ(ErrorOf([&] {
              dict.write_counted_behind({{"obs", DType::kFloat64, {2, kBehindWidth}, wide.data(),
                                          48}},
                                        w.index, kRowsCounter, 2);
            }).code(),
            StatusCode::kInvalidArgument);
  RowsWrite outside = MakeRowsWrite({3, kBehindRows}, 1.0f);
  EXPECT_EQ(ErrorOf([&] {
              dict.write_counted_behind(outside.Leaves(), outside.index, kRowsCounter, 2);
            }).code(),
            StatusCode::kOutOfRange);
  core::Index slice = {core::IndexTerm::Of(Slice{0, 2, 1})};
  value = dict.write_counted_behind(w.Leaves(), slice, kRowsCounter, 2);
  ASSERT_TRUE(value.has_value()) << "a slice is not checked here: written at once";
  EXPECT_EQ(*value, 4);
  std::vector<float> one_row = {7.0f, 8.0f, 9.0f};
  value = dict.write_counted_behind({{"obs", DType::kFloat32, {1, kBehindWidth}, one_row.data(),
                                      12}},
                                    w.index, kRowsCounter, 2);
  ASSERT_TRUE(value.has_value()) << "a broadcast value is tdstored's to check: written at once";
  EXPECT_EQ(*value, 6);
  EXPECT_EQ(dict.counter_get(kRowsCounter), 6);
  dict.drop();
}

TEST(E2eWritesBehind, AFailureIsThrownByTheNextCallOnceAndWhatFollowedItIsDropped) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeBehindDict(client);
  // The counter one short of its maximum: the second write's count
  // overflows, after its rows were written (OUT_OF_RANGE).
  const int64_t max = std::numeric_limits<int64_t>::max();
  ASSERT_EQ(dict.counter_add(kRowsCounter, max - 1), max - 1);
  std::vector<float> model(kBehindRows * kBehindWidth, 0.0f);
  // a and c are one row at an int index, which joins no other write
  // (rows_behind.h): so b goes alone, and c and d after it.
  RowsWrite a = MakeRowWrite(0, 10.0f);
  RowsWrite b = MakeRowsWrite({2, 3}, 20.0f);
  RowsWrite c = MakeRowWrite(4, 30.0f);
  RowsWrite d = MakeRowsWrite({6, 7}, 40.0f);
  // Queued while Redis is paused: the two after the failure are dropped,
  // whatever the timing.
  ASSERT_TRUE(QueuedWhileRedisIsPaused(dict, {&a, &b, &c, &d}));
  try {
    dict.counter_get(kRowsCounter);
    FAIL() << "the failed write behind was not thrown";
  } catch (const WriteBehindError& error) {
    // Its own type, the write's own code: a caller reading its own call's
    // OUT_OF_RANGE cannot take it for one.
    EXPECT_EQ(error.code(), StatusCode::kOutOfRange) << error.what();
    EXPECT_EQ(error.dropped(), 2);
    EXPECT_TRUE(Contains(error.what(), "2 write(s) queued after it were not sent")) << error.what();
  }
  // Thrown once: the next call is the dict's as it is.
  EXPECT_EQ(dict.counter_get(kRowsCounter), max);
  Apply(a, &model);
  Apply(b, &model);  // written, then not counted
  EXPECT_EQ(ReadLeafAs<float>(dict, "obs"), model) << "c and d must not be written";
  // The client goes on: a write behind after the failure lands.
  ASSERT_EQ(dict.counter_add(kRowsCounter, -max), 0);
  EXPECT_FALSE(dict.write_counted_behind(c.Leaves(), c.index, kRowsCounter, 2).has_value());
  Apply(c, &model);
  EXPECT_EQ(ReadLeafAs<float>(dict, "obs"), model);
  EXPECT_EQ(dict.counter_get(kRowsCounter), 2);
  dict.drop();
}

TEST(E2eWritesBehind, WritesJoinedIntoAFailedCallAreCountedAsDroppedAndNamed) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeBehindDict(client);
  const int64_t max = std::numeric_limits<int64_t>::max();
  ASSERT_EQ(dict.counter_add(kRowsCounter, max - 1), max - 1);
  // a (one row at an int index) joins nothing; b, c, d, queued while it
  // waits on the paused Redis, join into one call, whose count overflows
  // after its rows are written.
  RowsWrite a = MakeRowWrite(0, 10.0f);
  RowsWrite b = MakeRowsWrite({2, 3}, 20.0f);
  RowsWrite c = MakeRowsWrite({4, 5}, 30.0f);
  RowsWrite d = MakeRowsWrite({6, 7}, 40.0f);
  ASSERT_TRUE(QueuedWhileRedisIsPaused(dict, {&a, &b, &c, &d}));
  try {
    client.settle();
    FAIL() << "the failed write behind was not thrown";
  } catch (const WriteBehindError& error) {
    EXPECT_EQ(error.code(), StatusCode::kOutOfRange) << error.what();
    EXPECT_EQ(error.dropped(), 2) << error.what();
    EXPECT_TRUE(Contains(error.what(), "the rows were written but not counted")) << error.what();
    EXPECT_TRUE(Contains(error.what(), "2 write(s) queued after it went in the same call and "
                                       "failed with it, and 0 write(s) queued after it were "
                                       "not sent"))
        << error.what();
  }
  // The one call wrote every row it carried and counted none of them.
  std::vector<float> model(kBehindRows * kBehindWidth, 0.0f);
  for (const RowsWrite* w : {&a, &b, &c, &d}) Apply(*w, &model);
  EXPECT_EQ(ReadLeafAs<float>(dict, "obs"), model);
  EXPECT_EQ(dict.counter_get(kRowsCounter), max);
  dict.drop();
}

// RowsBehind itself (client/core/src/rows_behind.h), without the thread:
// which writes join, and that a joined call leaves the rows and the
// counter as the writes applied in turn leave them. Random writes, some
// disjoint from all before them, some not.
TEST(E2eWritesBehind, RowsJoinWhenNoRowIsWrittenTwiceAndLandAsTheyWouldInTurn) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeBehindDict(client);
  std::vector<float> model(kBehindRows * kBehindWidth, 0.0f);
  std::mt19937 rng(11);
  int64_t counted = 0;
  int joins = 0, refusals = 0;
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<RowsWrite> writes;
    const int k = std::uniform_int_distribution<int>(2, 6)(rng);
    for (int i = 0; i < k; ++i) {
      std::vector<int64_t> positions;
      const int n = std::uniform_int_distribution<int>(1, 6)(rng);
      for (int j = 0; j < n; ++j) {
        positions.push_back(std::uniform_int_distribution<int64_t>(0, kBehindRows - 1)(rng));
      }
      writes.push_back(MakeRowsWrite(positions, float(trial * 1000 + i * 100)));
    }
    // Chains in order: each write joins the chain before it unless a row
    // of it is in the chain; then it starts the next chain.
    std::vector<std::unique_ptr<core::RowsBehind>> chains;
    std::set<int64_t> rows_in_chain;
    for (const RowsWrite& w : writes) {
      auto next = std::make_unique<core::RowsBehind>(dict, w.Leaves(), w.index, kRowsCounter,
                                                     static_cast<int64_t>(w.positions.size()));
      bool overlaps = false;
      for (int64_t p : w.positions) overlaps |= rows_in_chain.count(p) != 0;
      const bool joined = !chains.empty() && chains.back()->Join(*next);
      EXPECT_EQ(joined, !chains.empty() && !overlaps) << "trial " << trial;
      if (!joined) {
        chains.push_back(std::move(next));
        rows_in_chain.clear();
        ++refusals;
      } else {
        ++joins;
      }
      rows_in_chain.insert(w.positions.begin(), w.positions.end());
      counted += static_cast<int64_t>(w.positions.size());
      Apply(w, &model);
    }
    for (auto& chain : chains) chain->Apply();
    ASSERT_EQ(ReadLeafAs<float>(dict, "obs"), model) << "trial " << trial;
    ASSERT_EQ(dict.counter_get(kRowsCounter), counted) << "trial " << trial;
  }
  EXPECT_GT(joins, 5);
  EXPECT_GT(refusals, 12);
  dict.drop();
}

TEST(E2eWritesBehind, RowsOfAnotherCounterLeafSetOrIndexOrPastTheCapDoNotJoin) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeBehindDict(client);
  RowsWrite a = MakeRowsWrite({0, 1}, 1.0f);
  RowsWrite b = MakeRowsWrite({2, 3}, 2.0f);
  auto chain = [&] {
    return std::make_unique<core::RowsBehind>(dict, a.Leaves(), a.index, kRowsCounter, 2);
  };
  // Another counter.
  core::RowsBehind other_counter(dict, b.Leaves(), b.index, "other", 2);
  EXPECT_FALSE(chain()->Join(other_counter));
  // One row at an int index, on either side.
  RowsWrite one = MakeRowWrite(5, 3.0f);
  core::RowsBehind at_int(dict, one.Leaves(), one.index, kRowsCounter, 1);
  EXPECT_FALSE(chain()->Join(at_int));
  EXPECT_FALSE(core::RowsBehind(dict, one.Leaves(), one.index, kRowsCounter, 1)
                   .Join(*chain()));
  // Other leaves (a second leaf), and the same leaf with a wider row.
  std::vector<float> more = {1.0f, 2.0f};
  std::vector<core::LeafData> two = b.Leaves();
  two.push_back({"extra", DType::kFloat32, {2}, more.data(), 8});
  core::RowsBehind two_leaves(dict, two, b.index, kRowsCounter, 2);
  EXPECT_FALSE(chain()->Join(two_leaves));
  std::vector<float> wide(2 * (kBehindWidth + 1), 0.0f);
  core::RowsBehind wider(dict, {{"obs", DType::kFloat32, {2, kBehindWidth + 1}, wide.data(),
                                 static_cast<int64_t>(wide.size() * sizeof(float))}},
                         b.index, kRowsCounter, 2);
  EXPECT_FALSE(chain()->Join(wider));
  // Another dict.
  core::Dict second = MakeBehindDict(client);
  core::RowsBehind elsewhere(second, b.Leaves(), b.index, kRowsCounter, 2);
  EXPECT_FALSE(chain()->Join(elsewhere));
  // Past kMaxJoinedBytes together (the rows' bytes only: the cap is the
  // core's, whatever the dict holds).
  const int64_t half_rows = core::RowsBehind::kMaxJoinedBytes / 2 / (kBehindWidth * 4) + 1;
  std::vector<float> big(static_cast<size_t>(half_rows * kBehindWidth), 0.0f);
  std::vector<int64_t> first_half(static_cast<size_t>(half_rows)), second_half(first_half.size());
  for (int64_t i = 0; i < half_rows; ++i) {
    first_half[i] = i;
    second_half[i] = half_rows + i;
  }
  auto big_write = [&](const std::vector<int64_t>& positions) {
    return std::make_unique<core::RowsBehind>(
        dict,
        std::vector<core::LeafData>{{"obs", DType::kFloat32, {half_rows, kBehindWidth}, big.data(),
                                     static_cast<int64_t>(big.size() * sizeof(float))}},
        core::Index{core::IndexTerm::Positions(positions, {half_rows})}, kRowsCounter, half_rows);
  };
  EXPECT_FALSE(big_write(first_half)->Join(*big_write(second_half)));
  // Past kMaxJoinedPositions together, well under the byte cap.
  const int64_t half_positions = core::RowsBehind::kMaxJoinedPositions / 2 + 1;
  std::vector<float> narrow(static_cast<size_t>(half_positions * kBehindWidth), 0.0f);
  auto many_rows = [&](int64_t from) {
    std::vector<int64_t> positions(static_cast<size_t>(half_positions));
    for (int64_t i = 0; i < half_positions; ++i) positions[i] = from + i;
    return std::make_unique<core::RowsBehind>(
        dict,
        std::vector<core::LeafData>{{"obs", DType::kFloat32, {half_positions, kBehindWidth},
                                     narrow.data(),
                                     static_cast<int64_t>(narrow.size() * sizeof(float))}},
        core::Index{core::IndexTerm::Positions(positions, {half_positions})}, kRowsCounter,
        half_positions);
  };
  EXPECT_FALSE(many_rows(0)->Join(*many_rows(half_positions)));
  // Adds whose sum would overflow: the call could not carry it.
  const int64_t big_add = std::numeric_limits<int64_t>::max() / 2 + 1;
  core::RowsBehind huge_add(dict, b.Leaves(), b.index, kRowsCounter, big_add);
  EXPECT_FALSE(core::RowsBehind(dict, a.Leaves(), a.index, kRowsCounter, big_add)
                   .Join(huge_add));
  // And what does join: the same counter, leaves and row shape, other rows.
  EXPECT_TRUE(chain()->Join(*std::make_unique<core::RowsBehind>(dict, b.Leaves(), b.index,
                                                                kRowsCounter, 2)));
  second.drop();
  dict.drop();
}

TEST(E2eWritesBehind, AClientsEndSendsWhatIsQueued) {
  std::string name;
  std::vector<float> model(kBehindRows * kBehindWidth, 0.0f);
  {
    core::Client client(DaemonAddress());
    core::Dict dict = MakeBehindDict(client);
    name = dict.name();
    for (int i = 0; i < 8; ++i) {
      RowsWrite w = MakeRowsWrite({i * 2, i * 2 + 1}, float(i * 10));
      dict.write_counted_behind(w.Leaves(), w.index, kRowsCounter, 2);
      Apply(w, &model);
    }
  }  // the last Dict and Client go: their state's end sends the writes first
  core::Client other(DaemonAddress());
  core::Dict seen = other.open(name);
  EXPECT_EQ(ReadLeafAs<float>(seen, "obs"), model);
  EXPECT_EQ(seen.counter_get(kRowsCounter), 16);
  seen.drop();
}

}  // namespace
}  // namespace tdstore::testing
