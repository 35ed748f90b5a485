// raw-sample-floor: the least Redis work of one replay sample, timed from
// C++ with plain hiredis: no tdstored, no gRPC, no Python, no torch
// (issue #33; tests/bench/sample_floor.py runs it beside torchrl's
// in-memory storage in the same run, docs/benchmarks.md).
//
//   raw-sample-floor --redis redis://127.0.0.1:6379 [--rows 5000]
//       [--row-bytes 276] [--batch 256] [--calls 2000] [--warmup 300]
//
// It writes `--rows` random records of `--row-bytes` bytes twice, under keys
// of its own (deleted at exit), and then times `--calls` samples of
// `--batch` random rows (with replacement) back to back, each way:
//
//   ranges  the records end to end in one string, as a record dict keeps a
//           block's rows. The sample's rows are sorted and those less than
//           2 KiB apart are merged into one run (tdstored's rule); one
//           GETRANGE per run, all in one pipeline.
//   fields  one hash field per record; the sample is one HMGET.
//
// Each row is copied out of the replies into a fresh buffer, in the
// sample's order, as a result tensor would be. One sample of each way is
// checked against the source bytes before the timing. Prints one JSON
// object: the mean ms per sample of each way and the GETRANGEs per sample.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/bench/raw_client.h"

namespace tdstore::bench {
namespace {

// tdstored merges runs of one key closer than this into one GETRANGE.
constexpr int64_t kMergeGapBytes = 2048;

struct Options {
  std::string redis;
  int64_t rows = 5000;
  int64_t row_bytes = 276;
  int64_t batch = 256;
  int calls = 2000;
  int warmup = 300;
};

template <typename T>
T Check(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) throw std::runtime_error(std::string(what) + ": " + v.status().ToString());
  return *std::move(v);
}
void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string(what) + ": " + s.ToString());
}
void CheckReply(const RawReply& r, int type, const char* what) {
  if (r == nullptr || r->type != type) {
    throw std::runtime_error(std::string(what) + ": unexpected reply" +
                             (r != nullptr && r->type == REDIS_REPLY_ERROR
                                  ? std::string(" ") + std::string(r->str, r->len)
                                  : std::string()));
  }
}

class Floor {
 public:
  Floor(RawRedis& redis, const Options& opt)
      : redis_(redis), opt_(opt), rng_(20261207) {
    // One hash tag: both keys on one node of a cluster.
    const std::string base = "tdstore-bench:sample-floor:{" + std::to_string(::getpid()) + "}";
    ranges_key_ = base + ":ranges";
    fields_key_ = base + ":fields";
    for (int64_t r = 0; r < opt_.rows; ++r) names_.push_back(std::to_string(r));
  }
  ~Floor() {
    Argv del;
    del.Add("DEL").Add(ranges_key_).Add(fields_key_);
    (void)redis_.Command(redis_.NodeFor(ranges_key_), del);
  }

  void Write() {
    source_.resize(static_cast<size_t>(opt_.rows * opt_.row_bytes));
    std::uniform_int_distribution<int> byte(0, 255);
    for (char& c : source_) c = static_cast<char>(byte(rng_));
    Argv set;
    set.Add("SET").Add(ranges_key_).Add(source_);
    CheckReply(Check(redis_.Command(redis_.NodeFor(ranges_key_), set), "SET"),
               REDIS_REPLY_STATUS, "SET");
    RawPipeline pipe(redis_);
    const int64_t per_command = 500;
    int64_t sent = 0;
    for (int64_t a = 0; a < opt_.rows; a += per_command) {
      Argv hset;
      hset.Add("HSET").Add(fields_key_);
      for (int64_t r = a; r < std::min(opt_.rows, a + per_command); ++r) {
        hset.Add(names_[static_cast<size_t>(r)]).Add(Row(r));
      }
      Check(pipe.Send(fields_key_, hset), "HSET");
      ++sent;
    }
    for (int64_t i = 0; i < sent; ++i) {
      CheckReply(Check(pipe.Receive(), "HSET"), REDIS_REPLY_INTEGER, "HSET");
    }
  }

  // One sample each way, checked against the source.
  void Verify() {
    const std::vector<int64_t> rows = Draw();
    if (!Matches(rows, SampleRanges(rows))) throw std::runtime_error("ranges read other bytes");
    if (!Matches(rows, SampleFields(rows))) throw std::runtime_error("fields read other bytes");
  }

  // Mean ms per sample over opt_.calls, after opt_.warmup untimed ones.
  double TimeRanges() {
    return Time([&](const std::vector<int64_t>& rows) { return SampleRanges(rows); });
  }
  double TimeFields() {
    return Time([&](const std::vector<int64_t>& rows) { return SampleFields(rows); });
  }
  double ranges_per_sample() const {
    return samples_ == 0 ? 0 : static_cast<double>(getranges_) / static_cast<double>(samples_);
  }

 private:
  std::string_view Row(int64_t r) const {
    return std::string_view(source_).substr(static_cast<size_t>(r * opt_.row_bytes),
                                            static_cast<size_t>(opt_.row_bytes));
  }
  std::vector<int64_t> Draw() {
    std::uniform_int_distribution<int64_t> pick(0, opt_.rows - 1);
    std::vector<int64_t> rows(static_cast<size_t>(opt_.batch));
    for (int64_t& r : rows) r = pick(rng_);
    return rows;
  }
  bool Matches(const std::vector<int64_t>& rows, const std::unique_ptr<char[]>& got) const {
    for (size_t i = 0; i < rows.size(); ++i) {
      if (std::memcmp(got.get() + static_cast<int64_t>(i) * opt_.row_bytes, Row(rows[i]).data(),
                      static_cast<size_t>(opt_.row_bytes)) != 0) {
        return false;
      }
    }
    return true;
  }

  std::unique_ptr<char[]> SampleRanges(const std::vector<int64_t>& rows) {
    const int64_t b = opt_.row_bytes;
    // The sample's positions in row order; runs of rows < 2 KiB apart.
    std::vector<size_t> order(rows.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return rows[x] < rows[y]; });
    struct Run {
      int64_t first_row, end_row;
    };
    std::vector<Run> runs;
    for (size_t i : order) {
      const int64_t r = rows[i];
      if (!runs.empty() && (r - runs.back().end_row) * b < kMergeGapBytes) {
        runs.back().end_row = std::max(runs.back().end_row, r + 1);
      } else {
        runs.push_back({r, r + 1});
      }
    }
    RawPipeline pipe(redis_);
    std::vector<std::string> bounds;
    bounds.reserve(2 * runs.size());
    for (const Run& run : runs) {
      bounds.push_back(std::to_string(run.first_row * b));
      bounds.push_back(std::to_string(run.end_row * b - 1));
    }
    for (size_t k = 0; k < runs.size(); ++k) {
      Argv get;
      get.Add("GETRANGE").Add(ranges_key_).Add(bounds[2 * k]).Add(bounds[2 * k + 1]);
      Check(pipe.Send(ranges_key_, get), "GETRANGE");
    }
    std::unique_ptr<char[]> out(new char[static_cast<size_t>(opt_.batch * b)]);
    size_t next = 0;  // into order
    for (const Run& run : runs) {
      RawReply reply = Check(pipe.Receive(), "GETRANGE");
      CheckReply(reply, REDIS_REPLY_STRING, "GETRANGE");
      for (; next < order.size() && rows[order[next]] < run.end_row; ++next) {
        std::memcpy(out.get() + static_cast<int64_t>(order[next]) * b,
                    reply->str + (rows[order[next]] - run.first_row) * b, static_cast<size_t>(b));
      }
    }
    getranges_ += static_cast<int64_t>(runs.size());
    ++samples_;
    return out;
  }

  std::unique_ptr<char[]> SampleFields(const std::vector<int64_t>& rows) {
    Argv hmget;
    hmget.Add("HMGET").Add(fields_key_);
    for (int64_t r : rows) hmget.Add(names_[static_cast<size_t>(r)]);
    RawReply reply = Check(redis_.Command(redis_.NodeFor(fields_key_), hmget), "HMGET");
    CheckReply(reply, REDIS_REPLY_ARRAY, "HMGET");
    if (reply->elements != rows.size()) throw std::runtime_error("HMGET: short reply");
    std::unique_ptr<char[]> out(new char[static_cast<size_t>(opt_.batch * opt_.row_bytes)]);
    for (size_t i = 0; i < rows.size(); ++i) {
      const redisReply* field = reply->element[i];
      if (field->type != REDIS_REPLY_STRING || static_cast<int64_t>(field->len) != opt_.row_bytes) {
        throw std::runtime_error("HMGET: a field is missing");
      }
      std::memcpy(out.get() + static_cast<int64_t>(i) * opt_.row_bytes, field->str, field->len);
    }
    return out;
  }

  template <typename Fn>
  double Time(Fn&& sample) {
    std::vector<std::vector<int64_t>> draws;
    for (int i = 0; i < opt_.warmup + opt_.calls; ++i) draws.push_back(Draw());
    for (int i = 0; i < opt_.warmup; ++i) sample(draws[static_cast<size_t>(i)]);
    getranges_ = samples_ = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = opt_.warmup; i < opt_.warmup + opt_.calls; ++i) sample(draws[static_cast<size_t>(i)]);
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
    return took.count() / opt_.calls;
  }

  RawRedis& redis_;
  const Options opt_;
  std::mt19937_64 rng_;
  std::string ranges_key_, fields_key_;
  std::vector<std::string> names_;
  std::string source_;
  int64_t getranges_ = 0, samples_ = 0;
};

Options Parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--redis") {
      opt.redis = value();
    } else if (a == "--rows") {
      opt.rows = std::stoll(value());
    } else if (a == "--row-bytes") {
      opt.row_bytes = std::stoll(value());
    } else if (a == "--batch") {
      opt.batch = std::stoll(value());
    } else if (a == "--calls") {
      opt.calls = std::stoi(value());
    } else if (a == "--warmup") {
      opt.warmup = std::stoi(value());
    } else {
      throw std::runtime_error("unknown argument " + a);
    }
  }
  if (opt.redis.empty()) throw std::runtime_error("--redis URL is required");
  if (opt.rows < 1 || opt.row_bytes < 1 || opt.batch < 1 || opt.calls < 1 || opt.warmup < 0) {
    throw std::runtime_error("--rows, --row-bytes, --batch and --calls must be positive");
  }
  return opt;
}

}  // namespace
}  // namespace tdstore::bench

int main(int argc, char** argv) {
  using namespace tdstore::bench;
  try {
    const Options opt = Parse(argc, argv);
    std::unique_ptr<RawRedis> redis = Check(RawRedis::Connect(opt.redis), "connect");
    Floor floor(*redis, opt);
    floor.Write();
    floor.Verify();
    const double ranges_ms = floor.TimeRanges();
    const double getranges = floor.ranges_per_sample();
    const double fields_ms = floor.TimeFields();
    std::printf("{\"ranges_ms\": %.4f, \"getranges_per_sample\": %.1f, \"fields_ms\": %.4f}\n",
                ranges_ms, getranges, fields_ms);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raw-sample-floor: %s\n", e.what());
    return 2;
  }
}
