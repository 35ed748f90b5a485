// (c) A replay buffer of 1,000,000 rows (--quick: 100,000): obs [N, 84]
// float32, action [N, 6] float32, reward [N] float32, done [N] bool.
//   c.fill        one update() of all four leaves vs raw SETRANGE windows
//   c.sample256   256 random rows (with replacement) of all leaves, x1000
//                 (--quick x100): p50, p99, rows/s
//   c.write_row   one row of all leaves, x10,000 (--quick x500): p50, p99
// (d) c.sample256 from 1, 4 and 16 client threads at once: total rows/s.
//     tdstore threads share one Client (one channel); raw threads each have
//     their own connection.
//
// Sampling and row writes run --repeats times (default 3), alternating which
// side goes first; each figure is the median over the repetitions.
#include <ATen/ATen.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "tests/bench/bench.h"

namespace tdstore::bench {
namespace {

constexpr int64_t kSample = 256;
const char* const kLeafNames[] = {"obs", "action", "reward", "done"};
constexpr int kLeafCount = 4;

// All threads start together once every one is ready.
class StartGate {
 public:
  explicit StartGate(int n) : waiting_for_(n) {}
  void ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--waiting_for_ == 0) cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void WaitReady() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return waiting_for_ == 0; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_for_;
  bool open_ = false;
};

struct ReplayData {
  int64_t rows = 0;
  int64_t row_bytes = 0;  // all leaves
  std::vector<std::vector<int64_t>> samples;
  std::vector<Index> sample_index;
  std::vector<int64_t> write_rows;
};

// Result buffers of one raw sample (fresh per call, like tensors).
void RawSample(RawOps& ops, const RawDict& dict, const std::vector<const RawLeaf*>& leaves,
               const std::vector<int64_t>& positions) {
  std::vector<Buffer> bufs;
  std::vector<char*> out;
  for (const RawLeaf* leaf : leaves) {
    bufs.push_back(NewBuffer(kSample * leaf->cell_bytes));
    out.push_back(bufs.back().get());
  }
  Check(ops.ReadIndexed(dict, {plan::IndexTerm::Positions(positions)}, leaves, out), "raw sample");
}

std::vector<const RawLeaf*> Leaves(const RawDict& dict) {
  std::vector<const RawLeaf*> out;
  for (const char* name : kLeafNames) {
    const RawLeaf* leaf = dict.leaf(name);
    if (leaf == nullptr) throw std::runtime_error(std::string("replay leaf missing: ") + name);
    out.push_back(leaf);
  }
  return out;
}

// Total rows/s of `threads` threads sharing the samples.
double ThreadedSampling(BenchEnv& env, Dict& td, bool raw, int threads, const ReplayData& data,
                        Side* side) {
  StartGate gate(threads);
  std::vector<std::thread> pool;
  std::vector<std::string> errors(static_cast<size_t>(threads));
  const size_t total = data.samples.size();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::unique_ptr<RawRedis> redis;
      std::unique_ptr<RawOps> ops;
      RawDict dict;
      std::vector<const RawLeaf*> leaves;
      Dict mine = td;
      try {
        if (raw) {
          redis = Check(RawRedis::Connect(env.redis_url), "raw connect");
          ops = Check(RawOps::Make(*redis), "raw scripts");
          dict = Check(LoadRawDict(*redis, env.opt.ns, "bench_replay"), "raw layout");
          leaves = Leaves(dict);
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
      gate.ArriveAndWait();
      if (!errors[static_cast<size_t>(t)].empty()) return;
      try {
        for (size_t i = static_cast<size_t>(t); i < total; i += static_cast<size_t>(threads)) {
          if (raw) {
            RawSample(*ops, dict, leaves, data.samples[i]);
          } else {
            mine.index(data.sample_index[i]);
          }
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
    });
  }
  gate.WaitReady();
  Meter meter(env);
  meter.Start();
  const double t0 = Now();
  gate.Open();
  for (std::thread& th : pool) th.join();
  const double wall = Now() - t0;
  side->Merge(meter.Stop(static_cast<int64_t>(total)));
  for (const std::string& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  return static_cast<double>(total * kSample) / wall;
}

Row MakeRow(const std::string& name, const std::string& metric, bool higher, double td, double raw,
            const Side& ts, const Side& rs, int64_t payload, int64_t result) {
  Row row;
  row.scenario = name;
  row.metric = metric;
  row.higher_is_better = higher;
  row.tdstore = td;
  row.raw = raw;
  row.td = ts;
  row.rw = rs;
  row.payload_bytes = payload;
  row.result_bytes = result;
  return row;
}

}  // namespace

void RunReplayScenarios(BenchEnv& env) {
  if (!env.opt.Selected("c") && !env.opt.Selected("d")) return;
  const bool quick = env.opt.quick;
  ReplayData data;
  data.rows = quick ? 100000 : 1000000;
  const int sample_iters = quick ? 100 : 1000;
  const int write_iters = quick ? 500 : 10000;
  const int repeats = env.opt.Repeats();
  const int64_t n = data.rows;

  Dict td = CreateDict(env, "bench_replay", {n});
  std::map<Key, at::Tensor> values = {
      {Key("obs"), at::rand({n, 84})},
      {Key("action"), at::rand({n, 6})},
      {Key("reward"), at::rand({n})},
      {Key("done"), at::rand({n}) < 0.01},
  };
  data.row_bytes = 84 * 4 + 6 * 4 + 4 + 1;
  const int64_t total_bytes = n * data.row_bytes;

  // ---- c.fill ------------------------------------------------------------
  {
    Meter meter(env);
    meter.Start();
    const double t0 = Now();
    td.update(values);
    const double td_s = Now() - t0;
    const Side ts = meter.Stop(1);
    if (env.opt.Selected("c.fill")) {
      Guard(env, "c.fill", [&] {
        RawDict dict = LoadDict(env, "bench_replay");
        const std::vector<const RawLeaf*> leaves = Leaves(dict);
        meter.Start();
        const double r0 = Now();
        for (int i = 0; i < kLeafCount; ++i) {
          Check(env.ops->PutLeaf(dict, *leaves[static_cast<size_t>(i)], 1000000001,
                                 static_cast<const char*>(values.at(Key(kLeafNames[i])).data_ptr())),
                "raw fill");
        }
        const double raw_s = Now() - r0;
        const Side rs = meter.Stop(1);
        for (const RawLeaf* leaf : leaves) {
          Check(env.ops->DeleteGeneration(dict, *leaf, 1000000001), "raw cleanup");
        }
        Row row = MakeRow("c.fill", "GB/s", true, static_cast<double>(total_bytes) / td_s / 1e9,
                          static_cast<double>(total_bytes) / raw_s / 1e9, ts, rs, total_bytes, 0);
        row.note = "one update() of 4 leaves (one call, once); raw: SETRANGE windows leaf by leaf";
        env.report.Add(std::move(row));
      });
    }
  }
  RawDict dict = LoadDict(env, "bench_replay");
  const std::vector<const RawLeaf*> leaves = Leaves(dict);

  std::mt19937_64 rng(env.opt.seed + 3);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  for (int i = 0; i < sample_iters; ++i) {
    std::vector<int64_t> positions(kSample);
    for (int64_t& p : positions) p = pick(rng);
    data.sample_index.emplace_back(positions);
    data.samples.push_back(std::move(positions));
  }
  for (int i = 0; i < write_iters; ++i) data.write_rows.push_back(pick(rng));
  const int64_t sample_bytes = kSample * data.row_bytes;

  // ---- c.sample256 ---------------------------------------------------------
  if (env.opt.Selected("c.sample256")) {
    Guard(env, "c.sample256", [&] {
      // Both sides read the same bytes.
      LocalDict got = td.index(data.sample_index[0]);
      std::vector<Buffer> bufs;
      std::vector<char*> out;
      for (const RawLeaf* leaf : leaves) {
        bufs.push_back(NewBuffer(kSample * leaf->cell_bytes));
        out.push_back(bufs.back().get());
      }
      Check(env.ops->ReadIndexed(dict, {plan::IndexTerm::Positions(data.samples[0])}, leaves, out),
            "raw sample");
      for (int i = 0; i < kLeafCount; ++i) {
        const at::Tensor& t = got.at(Key(kLeafNames[i]));
        if (std::memcmp(t.data_ptr(), out[static_cast<size_t>(i)], t.nbytes()) != 0) {
          throw std::runtime_error("c.sample256: the raw baseline read different bytes");
        }
      }

      Samples td_p50, td_p99, td_rate, raw_p50, raw_p99, raw_rate;
      Side ts, rs, vs;
      // Raw variants stepping towards tdstored's exact Redis work
      // (RawOps::Variant): its scripts; + 8 in flight; + its schema reads.
      const RawOps::Variant variants[] = {{true, 0, false}, {true, 8, false}, {true, 8, true}};
      Samples variant_p50[3];
      auto timed = [&](bool raw, Samples* lat) {
        int i = 0;
        return TimeOps(
            env, sample_iters,
            [&] {
              const size_t k = static_cast<size_t>(i++ % sample_iters);
              if (raw) {
                RawSample(*env.ops, dict, leaves, data.samples[k]);
              } else {
                td.index(data.sample_index[k]);
              }
            },
            lat);
      };
      for (int rep = 0; rep < repeats; ++rep) {
        for (int side = 0; side < 2; ++side) {
          const bool raw = (side + rep) % 2 == 1;
          Samples lat;
          const Side s = timed(raw, &lat);
          (raw ? rs : ts).Merge(s);
          (raw ? raw_p50 : td_p50).Add(lat.Percentile(50) * 1e3);
          (raw ? raw_p99 : td_p99).Add(lat.Percentile(99) * 1e3);
          (raw ? raw_rate : td_rate).Add(static_cast<double>(sample_iters * kSample) / lat.Sum());
        }
        for (int v = 0; v < 3; ++v) {
          env.ops->variant = variants[v];
          Samples lat;
          const Side s = timed(true, &lat);
          env.ops->variant = RawOps::Variant();
          if (v == 2) vs.Merge(s);
          variant_p50[v].Add(lat.Percentile(50) * 1e3);
        }
      }
      char steps[320];
      std::snprintf(steps, sizeof steps,
                    "; raw p50 again (the tdstore-scripts variant reads as raw does) %.3g ms, + 8 in flight %.3g ms, + its "
                    "schema reads %.3g ms",
                    variant_p50[0].Median(), variant_p50[1].Median(), variant_p50[2].Median());
      const std::string note = "median of " + std::to_string(repeats) + " runs of " +
                               std::to_string(sample_iters) + " samples; " +
                               std::to_string(dict.leaves[0].layout.block_count()) +
                               " blocks of " + std::to_string(dict.leaves[0].layout.rows_per_block()) +
                               " rows" + steps;
      Row p50 = MakeRow("c.sample256", "p50 ms", false, td_p50.Median(), raw_p50.Median(), ts, rs,
                        sample_bytes, sample_bytes);
      p50.targets.push_back({"raw/tdstore >= 0.67 (p50 <= 1.5x raw)", p50.ratio() >= 1 / 1.5});
      p50.note = note;
      env.report.Add(std::move(p50));
      env.report.Add(MakeRow("c.sample256", "p99 ms", false, td_p99.Median(), raw_p99.Median(), ts,
                             rs, sample_bytes, sample_bytes));
      env.report.Add(MakeRow("c.sample256", "rows/s", true, td_rate.Median(), raw_rate.Median(), ts,
                             rs, sample_bytes, sample_bytes));
      Row same = MakeRow("c.sample256 vs td-work", "p50 ms", false, td_p50.Median(),
                         variant_p50[2].Median(), ts, vs, sample_bytes, sample_bytes);
      same.note = "raw doing exactly tdstored's Redis work (its scripts, 8 in flight, its schema "
                  "reads): the rest of the gap is the service (gRPC, daemon, client)";
      env.report.Add(std::move(same));
    });
  }

  // ---- c.sample256_record ------------------------------------------------------
  // The same rows in a record dict (docs/storage-layout.md, "Record dicts"):
  // one range per sampled row instead of one per leaf and row. Its "raw"
  // column is the default layout's sample through tdstored, timed in turn
  // with it: the ratio is what the layout buys through the C++ client.
  if (env.opt.Selected("c.sample256_record")) {
    Guard(env, "c.sample256_record", [&] {
      CreateOptions options;
      options.layout = Layout::kRecord;
      try {
        env.client->drop("bench_replay_record");
      } catch (const Error& e) {
        if (e.code() != StatusCode::kNotFound) throw;
      }
      Dict record = env.client->create("bench_replay_record", {n}, options);
      // Written by rows (a record dict takes no whole leaves), in slices
      // within the indexed-call limit.
      const int64_t slice = 50000;
      for (int64_t a = 0; a < n; a += slice) {
        std::map<Key, at::Tensor> rows;
        for (const auto& [key, t] : values) rows[key] = t.slice(0, a, std::min(n, a + slice));
        record.set_index(Index(Slice(a, std::min(n, a + slice))), rows);
      }
      const LocalDict want = td.index(data.sample_index[0]);
      const LocalDict got = record.index(data.sample_index[0]);
      for (const char* name : kLeafNames) {
        if (!at::equal(want.at(Key(name)), got.at(Key(name)))) {
          throw std::runtime_error("c.sample256_record: the record dict read other rows");
        }
      }
      Samples record_p50, leaves_p50;
      Side rs, ls;
      for (int rep = 0; rep < repeats; ++rep) {
        for (int side = 0; side < 2; ++side) {
          const bool in_record = (side + rep) % 2 == 0;
          Dict& dict_of_side = in_record ? record : td;
          Samples lat;
          int i = 0;
          const Side s = TimeOps(
              env, sample_iters,
              [&] { dict_of_side.index(data.sample_index[static_cast<size_t>(i++ % sample_iters)]); },
              &lat);
          (in_record ? rs : ls).Merge(s);
          (in_record ? record_p50 : leaves_p50).Add(lat.Percentile(50) * 1e3);
        }
      }
      Row row = MakeRow("c.sample256_record", "p50 ms", false, record_p50.Median(),
                        leaves_p50.Median(), rs, ls, sample_bytes, sample_bytes);
      row.note = "record dict; the raw column is the default layout through tdstored; median of " +
                 std::to_string(repeats) + " runs of " + std::to_string(sample_iters) + " samples";
      env.report.Add(std::move(row));
      record.core().drop();
    });
  }

  // ---- c.write_row -----------------------------------------------------------
  if (env.opt.Selected("c.write_row")) {
    Guard(env, "c.write_row", [&] {
      const std::map<Key, at::Tensor> row = {
          {Key("obs"), at::rand({84})},
          {Key("action"), at::rand({6})},
          {Key("reward"), at::rand({})},
          {Key("done"), at::ones({}, at::kBool)},
      };
      std::vector<const char*> raw_values;
      for (const char* name : kLeafNames) {
        raw_values.push_back(static_cast<const char*>(row.at(Key(name)).data_ptr()));
      }
      Samples td_p50, td_p99, raw_p50, raw_p99;
      Side ts, rs, vs;
      const RawOps::Variant variants[] = {{true, 0, false}, {true, 8, true}};
      Samples variant_p50[2];
      auto timed = [&](bool raw, Samples* lat) {
        int i = 0;
        return TimeOps(
            env, write_iters,
            [&] {
              const int64_t r = data.write_rows[static_cast<size_t>(i++ % write_iters)];
              if (raw) {
                Check(env.ops->WriteIndexed(dict, {plan::IndexTerm::Int(r)}, leaves, raw_values),
                      "raw row write");
              } else {
                td.set_index(Index(r), row);
              }
            },
            lat);
      };
      for (int rep = 0; rep < repeats; ++rep) {
        for (int side = 0; side < 2; ++side) {
          const bool raw = (side + rep) % 2 == 1;
          Samples lat;
          const Side s = timed(raw, &lat);
          (raw ? rs : ts).Merge(s);
          (raw ? raw_p50 : td_p50).Add(lat.Percentile(50) * 1e3);
          (raw ? raw_p99 : td_p99).Add(lat.Percentile(99) * 1e3);
        }
        for (int v = 0; v < 2; ++v) {
          env.ops->variant = variants[v];
          Samples lat;
          const Side s = timed(true, &lat);
          env.ops->variant = RawOps::Variant();
          if (v == 1) vs.Merge(s);
          variant_p50[v].Add(lat.Percentile(50) * 1e3);
        }
      }
      char steps[160];
      std::snprintf(steps, sizeof steps,
                    "; raw p50 with tdstored's write_runs.lua %.3g ms, + its schema reads %.3g ms",
                    variant_p50[0].Median(), variant_p50[1].Median());
      Row p50 = MakeRow("c.write_row", "p50 ms", false, td_p50.Median(), raw_p50.Median(), ts, rs,
                        data.row_bytes, 0);
      p50.note = "median of " + std::to_string(repeats) + " runs of " + std::to_string(write_iters) +
                 " writes; raw: one EVALSHA of 4 SETRANGEs" + steps;
      env.report.Add(std::move(p50));
      env.report.Add(MakeRow("c.write_row", "p99 ms", false, td_p99.Median(), raw_p99.Median(), ts,
                             rs, data.row_bytes, 0));
      Row same = MakeRow("c.write_row vs td-work", "p50 ms", false, td_p50.Median(),
                         variant_p50[1].Median(), ts, vs, data.row_bytes, 0);
      same.note = "raw doing exactly tdstored's Redis work (write_runs.lua, its schema reads)";
      env.report.Add(std::move(same));
    });
  }

  // ---- d: concurrency ----------------------------------------------------------
  for (int threads : {1, 4, 16}) {
    const std::string name = "d.sample256_t" + std::to_string(threads);
    if (!env.opt.Selected(name)) continue;
    Guard(env, name, [&] {
      Samples td_rate, raw_rate;
      Side ts, rs;
      for (int rep = 0; rep < repeats; ++rep) {
        for (int side = 0; side < 2; ++side) {
          const bool raw = (side + rep) % 2 == 1;
          (raw ? raw_rate : td_rate)
              .Add(ThreadedSampling(env, td, raw, threads, data, raw ? &rs : &ts));
        }
      }
      Row row = MakeRow(name, "rows/s", true, td_rate.Median(), raw_rate.Median(), ts, rs,
                        sample_bytes, sample_bytes);
      row.note = std::to_string(threads) + " threads share " + std::to_string(sample_iters) +
                 " samples; median of " + std::to_string(repeats);
      env.report.Add(std::move(row));
    });
  }
  env.client->drop("bench_replay");
}

}  // namespace tdstore::bench
