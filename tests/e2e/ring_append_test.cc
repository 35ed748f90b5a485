// Ring appends (core::Dict::append_ring over WriteLeaves with a ring): rows
// reserved from a counter, written and counted in one call. Writers on
// several threads and two daemons never get the same rows; the content
// follows a local model of the ring on random batch sizes that wrap; the
// count only ever counts rows already written; refusals write nothing and
// give the reservation back. Through the torch-free core, on both back ends.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tdstore/client.h"
#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/leaf_values.h"
#include "tests/e2e/expect_error.h"

namespace tdstore::testing {
namespace {

const char kCursor[] = "ring.cursor";
const char kCount[] = "ring.count";

// Reads `path` whole as int64s.
std::vector<int64_t> ReadInts(const core::Dict& dict, const Key& path) {
  return ReadLeafAs<int64_t>(dict, path);
}

// `rows` rows of leaf "v" ([rows] int64) and "w" ([rows, 2] int64).
struct Rows {
  std::vector<int64_t> v, w;
  std::vector<core::LeafData> leaves() const {
    const auto n = static_cast<int64_t>(v.size());
    return {{"v", DType::kInt64, {n}, v.data(), n * 8},
            {"w", DType::kInt64, {n, 2}, w.data(), n * 16}};
  }
};
Rows MakeRows(int64_t first_value, int64_t rows) {
  Rows r;
  for (int64_t i = 0; i < rows; ++i) {
    r.v.push_back(first_value + i);
    r.w.push_back(first_value + i);
    r.w.push_back(-(first_value + i));
  }
  return r;
}

TEST(E2eRingAppend, ContentFollowsAModelOfTheRingOnRandomBatchesThatWrap) {
  core::Client client(DaemonAddress());
  CreateOptions options;
  options.rows_per_block = 8;  // appends cross blocks as well as the ring's end
  core::Dict dict = client.create(UniqueDictName(), {37}, {}, options);
  std::mt19937 rng(7);
  std::vector<int64_t> model_v(37, 0);
  int64_t cursor = 0;
  for (int k = 0; k < 40; ++k) {
    const int64_t rows = std::uniform_int_distribution<int64_t>(1, 37)(rng);
    const Rows r = MakeRows(1000 * (k + 1), rows);
    core::RingAppended got = dict.append_ring(r.leaves(), {kCursor, rows, kCount});
    ASSERT_EQ(got.start, cursor);
    cursor += rows;
    ASSERT_EQ(got.count_value, cursor);  // counted after its own rows, by no one else
    for (int64_t i = 0; i < rows; ++i) model_v[(got.start + i) % 37] = r.v[i];
  }
  EXPECT_EQ(ReadInts(dict, "v"), model_v);
  std::vector<int64_t> model_w;
  for (int64_t x : model_v) {
    model_w.push_back(x);
    model_w.push_back(-x);
  }
  EXPECT_EQ(ReadInts(dict, "w"), model_w);
  EXPECT_EQ(dict.counter_get(kCursor), cursor);
  EXPECT_EQ(dict.counter_get(kCount), cursor);
  dict.drop();
}

TEST(E2eRingAppend, WritersOnThreadsAndTwoDaemonsGetDisjointRows) {
  DaemonProcess other;
  ASSERT_TRUE(other.Start({"--redis", SharedRedis().url(), "--namespace", "e2e"}).ok())
      << other.LogTail();
  constexpr int kThreads = 4;
  constexpr int kAppends = 12;
  constexpr int64_t kRowsEach = 3;
  constexpr int64_t kSize = kThreads * kAppends * kRowsEach;  // one turn: no row twice
  const std::string name = UniqueDictName();
  core::Client(DaemonAddress()).create(name, {kSize});
  std::vector<std::vector<int64_t>> starts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      core::Client client(t % 2 == 0 ? DaemonAddress() : other.address());
      core::Dict dict = client.open(name);
      for (int k = 0; k < kAppends; ++k) {
        // Values name the writer and the batch: 100000 t + 100 k + row.
        const Rows r = MakeRows(100000 * (t + 1) + 100 * k, kRowsEach);
        core::RingAppended got = dict.append_ring(r.leaves(), {kCursor, kRowsEach, kCount});
        // The count never runs ahead of what was written: this append's
        // own rows are in it.
        EXPECT_GE(got.count_value, kRowsEach);
        starts[t].push_back(got.start);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  core::Dict dict = core::Client(DaemonAddress()).open(name);
  EXPECT_EQ(dict.counter_get(kCursor), kSize);
  EXPECT_EQ(dict.counter_get(kCount), kSize);
  std::set<int64_t> all;
  for (const auto& s : starts) all.insert(s.begin(), s.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kAppends));  // each reservation its own
  const std::vector<int64_t> v = ReadInts(dict, "v");
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kAppends; ++k) {
      for (int64_t i = 0; i < kRowsEach; ++i) {
        EXPECT_EQ(v[starts[t][k] + i], 100000 * (t + 1) + 100 * k + i)
            << "writer " << t << " batch " << k << " row " << i;
      }
    }
  }
  dict.drop();
  EXPECT_EQ(other.Stop(), 0) << other.LogTail();
}

TEST(E2eRingAppend, AResizeThroughAnotherDaemonIsSeenByTheNextAppend) {  // shrink, then grow
  DaemonProcess other;
  ASSERT_TRUE(other.Start({"--redis", SharedRedis().url(), "--namespace", "e2e"}).ok())
      << other.LogTail();
  const std::string name = UniqueDictName();
  core::Dict here = core::Client(DaemonAddress()).create(name, {10});
  const Rows first = MakeRows(1, 3);
  here.append_ring(first.leaves(), {kCursor, 3, kCount});  // this daemon caches [10]
  core::Client(other.address()).open(name).resize(4);
  // Rows 3..5 by the old size; by the new one, rows 3, 0, 1.
  const Rows next = MakeRows(10, 3);
  core::RingAppended got = here.append_ring(next.leaves(), {kCursor, 3, kCount});
  EXPECT_EQ(got.start, 3);
  EXPECT_EQ(ReadInts(here, "v"), (std::vector<int64_t>{11, 12, 3, 10}));
  // Grown to 8 through the other daemon: rows 6..8 by the new size are 6,
  // 7, 0 (by the cached 4 they would have been 2, 3, 0).
  core::Client(other.address()).open(name).resize(8);
  const Rows more = MakeRows(20, 3);
  got = here.append_ring(more.leaves(), {kCursor, 3, kCount});
  EXPECT_EQ(got.start, 6);
  EXPECT_EQ(ReadInts(here, "v"), (std::vector<int64_t>{22, 12, 3, 10, 0, 0, 20, 21}));
  here.drop();
  EXPECT_EQ(other.Stop(), 0) << other.LogTail();
}

TEST(E2eRingAppend, RefusalsWriteNothingAndGiveTheReservationBack) {
  core::Client client(DaemonAddress());
  core::Dict dict = client.create(UniqueDictName(), {10});
  const Rows four = MakeRows(1, 4);
  dict.append_ring(four.leaves(), {kCursor, 4, kCount});
  const auto before = NamespaceSnapshot("e2e");

  auto code_of = [](const std::function<void()>& call) { return ErrorOf(call).code(); };
  // Rows outside 1..batch dim 0, bad counter names, a value of another
  // shape or dtype: INVALID_ARGUMENT, and the store is as it was.
  const Rows eleven = MakeRows(1, 11);
  EXPECT_EQ(code_of([&] { dict.append_ring(eleven.leaves(), {kCursor, 11, kCount}); }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { dict.append_ring(four.leaves(), {kCursor, 0, kCount}); }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { dict.append_ring(four.leaves(), {"", 4, kCount}); }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { dict.append_ring(four.leaves(), {kCursor, 4, std::string(300, 'c')}); }),
            StatusCode::kInvalidArgument);
  // Rows that do not match the reservation (5 values for 4 rows).
  const Rows five = MakeRows(1, 5);
  EXPECT_EQ(code_of([&] { dict.append_ring(five.leaves(), {kCursor, 4, kCount}); }),
            StatusCode::kInvalidArgument);
  // "v" is int64: float rows are refused by tdstored (after reserving).
  std::vector<float> floats(4, 1.5f);
  EXPECT_EQ(code_of([&] {
              dict.append_ring({{"v", DType::kFloat32, {4}, floats.data(), 16}},
                               {kCursor, 4, kCount});
            }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NamespaceSnapshot("e2e"), before);
  EXPECT_EQ(dict.counter_get(kCursor), 4);
  EXPECT_EQ(dict.counter_get(kCount), 4);

  // A dict without batch dims has no ring; a handle to a deleted dict
  // reaches nothing.
  core::Dict scalar = client.create(UniqueDictName(), {});
  std::vector<int64_t> one{1};
  EXPECT_EQ(code_of([&] {
              scalar.append_ring({{"v", DType::kInt64, {1}, one.data(), 8}}, {kCursor, 1, ""});
            }),
            StatusCode::kInvalidArgument);
  scalar.drop();
  dict.drop();
  EXPECT_EQ(code_of([&] { dict.append_ring(four.leaves(), {kCursor, 4, kCount}); }),
            StatusCode::kNotFound);
}

TEST(E2eRingAppend, TheLibtorchClientAppendsTensorsAsTheCoreDoes) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {10});
  at::Tensor model_obs = at::zeros({10, 3});
  at::Tensor model_id = at::zeros({10}, at::kLong);
  int64_t cursor = 0;
  for (int64_t rows : {4, 7, 10, 3}) {
    const at::Tensor obs = at::rand({rows, 3});
    const at::Tensor id = at::arange(cursor, cursor + rows, at::kLong);
    core::RingAppended got = td.append_ring({{"obs", obs}, {"id", id}}, kCursor, kCount);
    ASSERT_EQ(got.start, cursor);
    const at::Tensor at_rows = at::remainder(id, 10);
    model_obs.index_put_({at_rows}, obs);
    model_id.index_put_({at_rows}, id);
    cursor += rows;
    EXPECT_EQ(got.count_value, cursor);
  }
  LocalDict all = td.to_local();
  EXPECT_TRUE(at::equal(all.at("obs"), model_obs));
  EXPECT_TRUE(at::equal(all.at("id"), model_id));
  // Leaves of different row counts, a leaf without rows, none at all.
  EXPECT_EQ(ErrorOf([&] {
              td.append_ring({{"obs", at::zeros({2, 3})}, {"id", at::zeros({3}, at::kLong)}},
                             kCursor);
            }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf([&] { td.append_ring({{"obs", at::zeros({})}}, kCursor); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf([&] { td.append_ring({}, kCursor); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(td.core().counter_get(kCursor), cursor);
  td.core().drop();
}

}  // namespace
}  // namespace tdstore::testing
