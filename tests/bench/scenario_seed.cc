// (a) The seed's own cases: N = 10,000 rows, 5 leaves of [N, 64] float32.
//
// Whole leaves: get and set one leaf, keys, to_local. Indexed: td[42],
// td[100:356], td[::3], td[256 random positions], td[bool mask of 256] read
// from one leaf ("read_leaf") and written to all five ("write"), and
// td[42 / 100:356 / random].to_local, which in this API is Dict::index over
// every leaf ("to_local[...]"). Every figure is the median latency of one call.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "tests/bench/bench.h"

namespace tdstore::bench {
namespace {

constexpr int64_t kRows = 10000;
constexpr int64_t kWidth = 64;
constexpr int kLeaves = 5;

struct IndexCase {
  std::string label;  // "42", "100:356", ...
  Index td;
  plan::IndexSpec spec;
  std::vector<int64_t> result_batch;  // indexed batch shape
  bool to_local = false;              // also run as td[idx].to_local
  bool large = false;                 // thousands of runs: fewer repetitions
};

int64_t Numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

Row LatencyRow(const std::string& name, const Samples& td, const Samples& raw, const Side& ts,
               const Side& rs, int64_t payload, int64_t result_bytes) {
  Row row;
  row.scenario = name;
  row.metric = "p50 ms";
  row.higher_is_better = false;
  row.tdstore = td.Median() * 1e3;
  row.raw = raw.Median() * 1e3;
  row.td = ts;
  row.rw = rs;
  row.payload_bytes = payload;
  row.result_bytes = result_bytes;
  return row;
}

void ExpectSame(const at::Tensor& t, const char* raw, const std::string& what) {
  if (std::memcmp(t.contiguous().data_ptr(), raw, t.nbytes()) != 0) {
    throw std::runtime_error(what + ": the raw baseline read different bytes than tdstore");
  }
}

}  // namespace

void RunSeedScenarios(BenchEnv& env) {
  if (!env.opt.Selected("a")) return;
  const bool quick = env.opt.quick;
  const int big_reps = quick ? 5 : 30;
  const int small_reps = quick ? 20 : 300;
  const int64_t leaf_bytes = kRows * kWidth * 4;

  Dict td = [&] {
    Dict d = CreateDict(env, "bench_seed", {kRows});
    std::map<Key, at::Tensor> values;
    for (int i = 0; i < kLeaves; ++i) values[Key("l" + std::to_string(i))] = at::rand({kRows, kWidth});
    d.update(values);
    return d;
  }();
  RawDict dict = LoadDict(env, "bench_seed");
  std::vector<const RawLeaf*> all;
  for (int i = 0; i < kLeaves; ++i) {
    const RawLeaf* leaf = dict.leaf("l" + std::to_string(i));
    if (leaf == nullptr) throw std::runtime_error("bench_seed: leaf l" + std::to_string(i) + " missing");
    all.push_back(leaf);
  }
  auto reload = [&] {
    dict = LoadDict(env, "bench_seed");
    for (int i = 0; i < kLeaves; ++i) all[static_cast<size_t>(i)] = dict.leaf("l" + std::to_string(i));
  };

  // Runs one case: tdstore's call, then the raw baseline's, each timed alone.
  auto run = [&](const std::string& name, int reps, int64_t payload, int64_t result_bytes,
                 const std::function<void()>& td_op, const std::function<void()>& raw_op,
                 const std::function<void()>& raw_after = nullptr, const std::string& note = "") {
    if (!env.opt.Selected(name)) return;
    Guard(env, name, [&] {
      Samples tl, rl;
      const Side ts = TimeOps(env, reps, td_op, &tl);
      const Side rs = TimeOps(env, reps, raw_op, &rl, raw_after);
      Row row = LatencyRow(name, tl, rl, ts, rs, payload, result_bytes);
      row.note = note;
      env.report.Add(std::move(row));
    });
  };

  // ---- the floor of any call -------------------------------------------------
  run("a.rpc_floor", small_reps, 0, 0, [&] { env.client->server_info(); },
      [&] { Check(env.raw->Command(0, {"PING"}).status(), "raw PING"); }, nullptr,
      "tdstore: one unary gRPC call whose handler PINGs Redis; raw: PING");

  // ---- whole leaves ------------------------------------------------------
  run("a.get_leaf", big_reps, leaf_bytes, leaf_bytes, [&] { td.get("l0"); },
      [&] {
        Buffer out = NewBuffer(leaf_bytes);
        Check(env.ops->GetLeaves(dict, {all[0]}, {out.get()}), "raw get");
      });
  if (env.opt.Selected("a.get_leaf")) {
    Guard(env, "a.get_leaf (check)", [&] {
      at::Tensor t = td.get("l0");
      Buffer out = NewBuffer(leaf_bytes);
      Check(env.ops->GetLeaves(dict, {all[0]}, {out.get()}), "raw get");
      ExpectSame(t, out.get(), "a.get_leaf");
    });
  }
  run("a.keys", small_reps, 0, 0, [&] { td.keys(); },
      [&] { Check(env.ops->CountKeys(dict).status(), "raw keys"); }, nullptr,
      "raw: one HKEYS; tdstore: catalog HGET + meta/leaves HGETALL + gRPC");
  run("a.to_local", big_reps, kLeaves * leaf_bytes, kLeaves * leaf_bytes, [&] { td.to_local(); },
      [&] {
        std::vector<Buffer> bufs;
        std::vector<char*> out;
        for (int i = 0; i < kLeaves; ++i) {
          bufs.push_back(NewBuffer(leaf_bytes));
          out.push_back(bufs.back().get());
        }
        Check(env.ops->GetLeaves(dict, all, out), "raw to_local");
      },
      nullptr, "values()/items() move the same bytes");
  {
    const at::Tensor value = at::rand({kRows, kWidth});
    int64_t gen = 1000000000;
    run("a.set_leaf", big_reps, leaf_bytes, 0, [&] { td.set("l0", value); },
        [&] {
          Check(env.ops->PutLeaf(dict, *all[0], ++gen, static_cast<const char*>(value.data_ptr())),
                "raw set");
        },
        [&] { Check(env.ops->DeleteGeneration(dict, *all[0], gen), "raw cleanup"); },
        "raw: SETRANGE windows into a fresh generation's keys (deleted untimed)");
    reload();  // l0 has a new generation now
  }

  // ---- indexed -------------------------------------------------------------
  std::mt19937_64 rng(env.opt.seed);
  std::vector<IndexCase> cases;
  cases.push_back({"42", Index(42), {plan::IndexTerm::Int(42)}, {}, true, false});
  cases.push_back(
      {"100:356", Index(Slice(100, 356)), {plan::IndexTerm::Slice(100, 356)}, {256}, true, false});
  cases.push_back({"::3", Index(Slice(std::nullopt, std::nullopt, 3)),
                   {plan::IndexTerm::Slice(std::nullopt, std::nullopt, 3)},
                   {(kRows + 2) / 3},
                   false,
                   true});
  {
    std::uniform_int_distribution<int64_t> pick(0, kRows - 1);
    std::vector<int64_t> positions(256);
    for (int64_t& p : positions) p = pick(rng);
    cases.push_back(
        {"rand256", Index(positions), {plan::IndexTerm::Positions(positions)}, {256}, true, false});
  }
  {
    std::vector<int64_t> order(kRows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<bool> mask(kRows, false);
    at::Tensor mask_t = at::zeros({kRows}, at::kBool);
    for (int i = 0; i < 256; ++i) {
      mask[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
      mask_t.data_ptr<bool>()[order[static_cast<size_t>(i)]] = true;
    }
    cases.push_back({"mask256", Index(mask_t), {plan::IndexTerm::Mask(mask)}, {256}, false, false});
  }

  const int64_t row_bytes = kWidth * 4;
  for (const IndexCase& c : cases) {
    const int reps = c.large ? big_reps : small_reps;
    const int64_t cells = Numel(c.result_batch);
    std::vector<int64_t> value_shape = c.result_batch;
    value_shape.push_back(kWidth);

    // td["l0"][idx]: one leaf.
    run("a.read_leaf[" + c.label + "]", reps, cells * row_bytes, cells * row_bytes,
        [&] { td.index(c.td, {Key("l0")}); },
        [&] {
          Buffer out = NewBuffer(cells * row_bytes);
          Check(env.ops->ReadIndexed(dict, c.spec, {all[0]}, {out.get()}), "raw indexed read");
        });
    // td[idx].to_local(): every leaf.
    if (c.to_local) {
      const std::string name = "a.to_local[" + c.label + "]";
      run(name, reps, kLeaves * cells * row_bytes, kLeaves * cells * row_bytes,
          [&] { td.index(c.td); },
          [&] {
            std::vector<Buffer> bufs;
            std::vector<char*> out;
            for (int i = 0; i < kLeaves; ++i) {
              bufs.push_back(NewBuffer(cells * row_bytes));
              out.push_back(bufs.back().get());
            }
            Check(env.ops->ReadIndexed(dict, c.spec, all, out), "raw indexed read");
          });
      if (env.opt.Selected(name)) {
        Guard(env, name + " (check)", [&] {
          LocalDict got = td.index(c.td);
          std::vector<Buffer> bufs;
          std::vector<char*> out;
          for (int i = 0; i < kLeaves; ++i) {
            bufs.push_back(NewBuffer(cells * row_bytes));
            out.push_back(bufs.back().get());
          }
          Check(env.ops->ReadIndexed(dict, c.spec, all, out), "raw indexed read");
          for (int i = 0; i < kLeaves; ++i) {
            ExpectSame(got.at(Key("l" + std::to_string(i))), out[static_cast<size_t>(i)], name);
          }
        });
      }
    }
    // td[idx] = values: every leaf.
    {
      std::map<Key, at::Tensor> values;
      std::vector<const char*> raw_values;
      for (int i = 0; i < kLeaves; ++i) {
        at::Tensor v = at::rand(value_shape);
        raw_values.push_back(static_cast<const char*>(v.data_ptr()));
        values[Key("l" + std::to_string(i))] = v;
      }
      run("a.write[" + c.label + "]", reps, kLeaves * cells * row_bytes, 0,
          [&] { td.set_index(c.td, values); },
          [&] { Check(env.ops->WriteIndexed(dict, c.spec, all, raw_values), "raw indexed write"); });
    }
  }
  env.client->drop("bench_seed");
}

}  // namespace tdstore::bench
