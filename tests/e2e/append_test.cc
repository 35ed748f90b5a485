// Streaming appends (core::Appender over tdstored's AppendRows): rows sent
// as they come, coalesced, acknowledged in batches, failures reported and
// never dropped. Through the torch-free core, on both back ends.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "tdstore/core.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/leaf_values.h"

namespace tdstore::testing {
namespace {

constexpr int64_t kRows = 100;
constexpr int64_t kWidth = 3;

// Reads `path` whole as floats.
std::vector<float> ReadFloats(const core::Dict& dict, const Key& path) {
  return ReadLeafAs<float>(dict, path);
}

// A dict of kRows rows: obs [kRows, kWidth] f32 and reward [kRows] f32,
// zero-filled, in blocks of 16 rows so appends cross block boundaries.
core::Dict MakeDict(const core::Client& client) {
  CreateOptions options;
  options.rows_per_block = 16;
  return client.create(UniqueDictName(), {kRows},
                       {{"obs", DType::kFloat32, {kWidth}}, {"reward", DType::kFloat32, {}}},
                       options);
}

// Row r of the test data: obs = (r, r + .25, r + .5), reward = -r.
std::vector<float> ObsRow(int64_t r) {
  return {float(r), float(r) + 0.25f, float(r) + 0.5f};
}

TEST(E2eAppend, RowsOneAtATimeLandInPlaceAcrossBlocksAndWrapAround) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeDict(client);
  core::AppendOptions options;
  options.batch_rows = 10;  // several batches, some across a block boundary
  options.window = 2;
  core::Appender out = dict.appender({"obs", "reward"}, options);
  EXPECT_EQ(out.row_bytes(), (std::vector<int64_t>{kWidth * 4, 4}));
  // A ring buffer's cursor: rows 40..99, then 0..29 (non-consecutive there).
  std::vector<int64_t> order;
  for (int64_t r = 40; r < kRows; ++r) order.push_back(r);
  for (int64_t r = 0; r < 30; ++r) order.push_back(r);
  for (int64_t r : order) {
    const std::vector<float> obs = ObsRow(r);
    const float reward = -float(r);
    out.append(r, 1, {obs.data(), &reward});
  }
  out.flush();
  EXPECT_EQ(out.rows_written(), static_cast<int64_t>(order.size()));

  const std::vector<float> obs = ReadFloats(dict, "obs");
  const std::vector<float> reward = ReadFloats(dict, "reward");
  for (int64_t r = 0; r < kRows; ++r) {
    const bool written = r < 30 || r >= 40;
    const std::vector<float> want = written ? ObsRow(r) : std::vector<float>(kWidth, 0.0f);
    EXPECT_EQ(std::vector<float>(obs.begin() + r * kWidth, obs.begin() + (r + 1) * kWidth), want)
        << "row " << r;
    EXPECT_EQ(reward[static_cast<size_t>(r)], written ? -float(r) : 0.0f) << "row " << r;
  }
  dict.drop();
}

TEST(E2eAppend, ARefusedBatchIsReportedOnceAndTheOthersAreWritten) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeDict(client);
  core::AppendOptions options;
  options.batch_rows = 4;
  core::Appender out = dict.appender({"reward"}, options);
  const std::vector<float> four = {1, 2, 3, 4};
  out.append(0, 4, {four.data()});
  out.append(kRows - 2, 4, {four.data()});  // rows 98..101: past the end
  out.append(10, 4, {four.data()});
  try {
    out.flush();
    FAIL() << "a batch past the end was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kOutOfRange) << e.what();
    EXPECT_NE(std::string(e.what()).find("[98, 102)"), std::string::npos) << e.what();
  }
  out.flush();  // reported once: the appender goes on
  EXPECT_EQ(out.rows_written(), 8);
  const std::vector<float> reward = ReadFloats(dict, "reward");
  EXPECT_EQ(std::vector<float>(reward.begin(), reward.begin() + 4), four);
  EXPECT_EQ(std::vector<float>(reward.begin() + 10, reward.begin() + 14), four);
  EXPECT_EQ(reward[98], 0.0f) << "a refused batch wrote rows";
  EXPECT_EQ(reward[99], 0.0f) << "a refused batch wrote rows";
  dict.drop();
}

TEST(E2eAppend, BadAppendersAreRefusedBeforeAnyStream) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeDict(client);
  try {
    dict.appender({"nope"});
    FAIL() << "an appender for a missing leaf";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  }
  core::Appender out = dict.appender({"obs", "reward"});
  const float one = 1;
  try {
    out.append(0, 1, {&one});
    FAIL() << "rows of one leaf for an appender of two";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.what();
  }
  out.flush();
  EXPECT_EQ(out.rows_written(), 0);
  dict.drop();
}

TEST(E2eAppend, AnAppenderNeverWritesTheNamesakeThatReplacedItsDict) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeDict(client);
  core::Appender out = dict.appender({"reward"});
  const float one = 1;
  out.append(0, 1, {&one});
  out.flush();
  client.drop(dict.name());
  core::Dict namesake = client.create(dict.name(), {kRows}, {{"reward", DType::kFloat32, {}}});
  out.append(1, 1, {&one});
  try {
    out.flush();
    FAIL() << "an appender wrote into the namesake";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kNotFound) << e.what();
  }
  EXPECT_EQ(ReadFloats(namesake, "reward"), std::vector<float>(kRows, 0.0f));
  namesake.drop();
}

TEST(E2eAppend, WritersInSeveralThreadsShareADict) {
  core::Client client(DaemonAddress());
  core::Dict dict = MakeDict(client);
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      core::Appender out = dict.appender({"reward"});
      for (int64_t r = w; r < kRows; r += 4) {  // interleaved: never consecutive
        const float v = float(r) + 1;
        out.append(r, 1, {&v});
      }
      out.flush();
    });
  }
  for (std::thread& t : writers) t.join();
  std::vector<float> want(kRows);
  std::iota(want.begin(), want.end(), 1.0f);
  EXPECT_EQ(ReadFloats(dict, "reward"), want);
  dict.drop();
}

}  // namespace
}  // namespace tdstore::testing
