// The libtorch client's Appender (tdstore::Dict::appender): at::Tensor rows
// over one stream, compared with the same rows written into a local tensor,
// and bad rows refused before anything is queued.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <random>
#include <vector>

#include "tdstore/client.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/expect_error.h"
#include "tests/e2e/tensor_testing.h"

namespace tdstore::testing {
namespace {

TEST(E2eClientAppend, RowsInAnyOrderEqualALocalTensor) {
  Client client(DaemonAddress());
  const int64_t n = 300;  // more than one batch of 256 coalesced rows
  Dict td = client.create(UniqueDictName(), {n});
  td.update({{"obs", at::zeros({n, 3}, at::kFloat)}, {{"next", "done"}, at::zeros({n}, at::kBool)}});
  at::Tensor obs = at::zeros({n, 3}, at::kFloat);
  at::Tensor done = at::zeros({n}, at::kBool);

  std::mt19937 rng(5);
  core::AppendOptions options;
  options.batch_rows = 16;
  options.window = 2;
  Appender out = td.appender({"obs", {"next", "done"}}, options);
  int64_t appended = 0;
  for (int step = 0; step < 120; ++step) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 4);
    // A ring cursor that jumps now and then: runs of consecutive rows, and breaks.
    const int64_t start = (step % 7 == 0) ? static_cast<int64_t>(rng() % (n - rows))
                                          : (appended % (n - rows));
    const at::Tensor o = RandomTensor(at::kFloat, {rows, 3}, static_cast<uint32_t>(step));
    const at::Tensor d = RandomTensor(at::kBool, {rows}, static_cast<uint32_t>(step + 1000));
    out.append(start, {o, d});
    obs.slice(0, start, start + rows).copy_(o);
    done.slice(0, start, start + rows).copy_(d);
    appended += rows;
  }
  out.flush();
  EXPECT_EQ(out.rows_written(), appended);
  EXPECT_TRUE(SameBytes(obs, td.get("obs")));
  EXPECT_TRUE(SameBytes(done, td.get({"next", "done"})));
  // Non-contiguous rows are copied, not misread.
  const at::Tensor wide = RandomTensor(at::kFloat, {2, 6}, 77);
  out.append(10, {wide.slice(1, 0, 6, 2), at::ones({2}, at::kBool)});
  out.flush();
  EXPECT_TRUE(SameBytes(wide.slice(1, 0, 6, 2).contiguous(), td.get("obs").slice(0, 10, 12)));
  td.core().drop();
}

TEST(E2eClientAppend, BadRowsAreRefusedAndNothingIsWritten) {
  Client client(DaemonAddress());
  Dict td = client.create(UniqueDictName(), {8});
  td.update({{"obs", at::zeros({8, 3}, at::kFloat)}, {"act", at::zeros({8}, at::kLong)}});
  Appender out = td.appender({"obs", "act"});
  const at::Tensor obs = at::ones({2, 3}, at::kFloat);
  const at::Tensor act = at::ones({2}, at::kLong);
  EXPECT_EQ(ErrorOf([&] { out.append(0, {obs.to(at::kDouble), act}); }).code(),
            StatusCode::kInvalidArgument);  // no casting
  EXPECT_EQ(ErrorOf([&] { out.append(0, {at::ones({2, 4}), act}); }).code(),
            StatusCode::kInvalidArgument);  // element shape
  EXPECT_EQ(ErrorOf([&] { out.append(0, {obs, at::ones({3}, at::kLong)}); }).code(),
            StatusCode::kInvalidArgument);  // row counts differ
  EXPECT_EQ(ErrorOf([&] { out.append(0, {obs}); }).code(), StatusCode::kInvalidArgument);
  out.flush();
  EXPECT_EQ(out.rows_written(), 0);
  EXPECT_TRUE(SameBytes(at::zeros({8, 3}, at::kFloat), td.get("obs")));
  // Rows past the end: refused by tdstored, reported by the next flush.
  out.append(7, {obs, act});
  EXPECT_EQ(ErrorOf([&] { out.flush(); }).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(SameBytes(at::zeros({8}, at::kLong), td.get("act")));
  EXPECT_EQ(ErrorOf([&] { td.appender({"missing"}); }).code(), StatusCode::kNotFound);
  td.core().drop();
}

}  // namespace
}  // namespace tdstore::testing
