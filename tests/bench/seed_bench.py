#!/usr/bin/env python3
"""The seed's own 19 benchmark cases, three ways, against the same Redis in one run.

Issue #13 item 1. The three sides:
  seed    tensordict's ``tensordict.store.TensorDictStore`` over redis-py (PyPI);
  Python  tdstore's ``tdstore.TensorDictStore``, through the tdstored started here;
  C++     the libtorch client: ``tdstore-bench --addr <that tdstored> --scenario a.
          ...`` (tests/bench/scenario_seed.cc, scenario_replay.cc,
          scenario_bulk.cc), which also measures a raw hiredis client doing the
          ideal Redis work for each row: the "raw ideal" column.

    build/venv/bin/python tests/bench/seed_bench.py                 # 3 rounds
    build/venv/bin/python tests/bench/seed_bench.py --quick         # small, < 2 min
    ... --repeats 5 --unix --cluster --json out.json --markdown out.md --profile
    ... --tdstored PATH --bench PATH     # default: build/server/tdstored, build/tests/bench/tdstore-bench

The cases are tensordict's benchmarks/storage/bench_backends.py (the
TensorDictStore version of its storage benchmark), named as it names them:
N = 10,000 rows, 5 keys ``key_i`` of [N, 64] float32; get / set one key;
list(keys()), list(values()), list(items()); td[idx] for idx = 42,
100:356, 0:N:3, 256 random positions (torch.randint, with repeats) and a
bool mask; td[idx] = TensorDict of those rows (5 keys); to_tensordict();
td[42 / 100:356 / fancy].to_tensordict(). One deliberate difference: the
seed's script builds its mask with ``mask[torch.randint(0, N, (256,))] = True``
(about 253 true after repeats); here the mask has exactly 256 true, as the C++
row a.*[mask256] has. Plus the replay rows (1,000,000 rows: obs [N,84] f32,
action [N,6] f32, reward [N] f32, done [N] bool; td[i] = one row of the 4
leaves, p50; td[256 random rows], p50) and the bulk rows (put and get of one
float32 leaf [65536, 1024] = 256 MiB, MB/s). --quick: 100,000 replay rows,
a 16 MiB leaf, fewer repetitions (and tdstore-bench --quick).

How it is timed (a 2-core shared machine): every round runs the C++ benchmark
once and one Python round; which goes first alternates. Inside a Python round
each case runs the two Python sides in blocks A B B A (the first side
alternates between rounds) after 2 untimed warm-up calls per side (the seed
script's WARMUP). A round's figure is the median of its calls; the table shows
the median over rounds (C++: the median of its per-run p50s), and each ratio
is the median of the rounds' own ratios, so that it compares figures taken
in the same round. Before every
timed call of a case each side's result is checked once against the source
tensors, outside the timed loop (for writes: the rows read back). tdstore-bench
checks its own reads against its raw baseline (a.get_leaf, a.to_local[...],
c.sample256); its write rows it does not read back.

Ratios: "vs seed" = seed time / tdstore time (> 1: tdstore is faster; for
MB/s: tdstore MB/s / seed MB/s); "vs raw" = raw time / tdstore time.

--cluster starts a 3-master (+3 replica) loopback Redis Cluster (as the
Python test suite does) and points tdstored and the seed at it: the seed gets
a ``redis.asyncio.RedisCluster`` as its ``client=`` (its keys carry one hash
tag per dict, so one dict lives on one master).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_bench as pb  # noqa: E402  (servers, settle, tdstore-bench runs, percentiles)

REPO = pb.REPO
MiB = pb.MiB
N = 10_000
N_KEYS = 5
FEAT = 64
WARMUP = 2

# The seed script's cases in its order and with its names. Each maps to the
# tdstore-bench row doing the same work through the C++ client (None: that
# binary has no identical case, and the cell stays empty):
#  - C++ Dict::index(idx) over every leaf returns local tensors: it is both
#    td[idx] and td[idx].to_tensordict() (the latter adds a local copy in
#    Python); the rows are a.to_local[42 / 100:356 / rand256].
#  - td[::3] and td[bool] over all leaves: the C++ benchmark only reads them
#    from one leaf (a.read_leaf[::3], a.read_leaf[mask256]): not the same work.
#  - values()/items(): the C++ client has no iterator over values; to_local()
#    moves the same 5 whole leaves, in one call (a.to_local).
CASES = [
    ("get single key", "a.get_leaf"),
    ("set single key", "a.set_leaf"),
    ("keys() iteration", "a.keys"),
    ("values() iteration", "a.to_local"),
    ("items() iteration", "a.to_local"),
    ("read td[int]", "a.to_local[42]"),
    ("read td[slice]", "a.to_local[100:356]"),
    ("read td[::3]", None),
    ("read td[fancy]", "a.to_local[rand256]"),
    ("read td[bool]", None),
    ("write td[int]=v", "a.write[42]"),
    ("write td[slice]=v", "a.write[100:356]"),
    ("write td[::3]=v", "a.write[::3]"),
    ("write td[fancy]=v", "a.write[rand256]"),
    ("write td[bool]=v", "a.write[mask256]"),
    ("to_tensordict()", "a.to_local"),
    ("td[int].to_td()", "a.to_local[42]"),
    ("td[slice].to_td()", "a.to_local[100:356]"),
    ("td[fancy].to_td()", "a.to_local[rand256]"),
]
# tdstore-bench rows with no seed case: shown in a second table.
CPP_ONLY = ["a.rpc_floor", "a.read_leaf[42]", "a.read_leaf[100:356]", "a.read_leaf[::3]",
            "a.read_leaf[rand256]", "a.read_leaf[mask256]"]
SIDES = ("seed", "tds")
TITLES = {"seed": "seed", "tds": "tdstore Python", "cpp": "C++"}


def log(*a):
    pb.log(*a)


# ---- servers ---------------------------------------------------------------------

class ClusterEnv(pb.Env):
    """python_bench's Env over a 3-master + 3-replica loopback Redis Cluster,
    started as the Python test suite starts it (tests/python/conftest.py)."""

    def start_redis(self):
        import redis

        sys.path.insert(0, os.path.join(REPO, "tests", "python"))
        os.environ.setdefault("TDSTORE_REDIS_SERVER", self.args.redis_server)
        import conftest

        self._procs = conftest.Processes()
        self.redis_url = conftest.start_cluster(self._procs, Path(self.dir))
        ports = [int(hp.rsplit(":", 1)[1])
                 for hp in self.redis_url[len("redis-cluster://"):].split(",")]
        self.redis_port = ports[0]
        self.redis_pid = self._procs.procs[0][0].pid
        self.r = redis.Redis(host="127.0.0.1", port=ports[0])
        self.nodes = [redis.Redis(host="127.0.0.1", port=int(p.args[p.args.index("--port") + 1]))
                      for p, _ in self._procs.procs]
        log(f"Redis Cluster: {self.redis_url} (+3 replicas)")

    def stop(self):
        if getattr(self, "_procs", None) is not None and self.daemon_proc is not None:
            if self.daemon_proc.poll() is None:
                self.daemon_proc.terminate()
                self.daemon_proc.wait(15)
        if getattr(self, "_procs", None) is not None:
            self._procs.stop()
        super().stop()


def seed_store(env, batch_size, prefix):
    """The seed's TensorDictStore on env's Redis (standalone or cluster)."""
    from tensordict.store import TensorDictStore as SeedStore

    if env.args.cluster:
        from redis.asyncio.cluster import RedisCluster

        client = RedisCluster(host="127.0.0.1", port=env.redis_port)
        return SeedStore(client=client, batch_size=batch_size, prefix=prefix)
    if env.redis_socket:  # --redis-unix: the seed reaches Redis as tdstored does
        return SeedStore(unix_socket_path=env.redis_socket, batch_size=batch_size, prefix=prefix)
    return SeedStore(host="127.0.0.1", port=env.redis_port, batch_size=batch_size, prefix=prefix)


# ---- checks --------------------------------------------------------------------

def positions(idx) -> torch.Tensor:
    return torch.arange(N)[idx].reshape(-1)


def expect(cond, what):
    if not cond:
        raise RuntimeError("wrong bytes: " + what)


def check_leaves(got, mirror, idx, what):
    for k in mirror.keys():
        want = mirror[k] if idx is None else mirror[k][idx]
        expect(torch.equal(got[k], want), f"{what}: {k}")


def check_write(td, mirror, idx, sub, what):
    """Reads back td[idx] after td[idx] = sub; rows of a repeated position may
    hold any of the rows written there. Then brings the mirror up to date."""
    pos = positions(idx)
    got = td[idx]
    _, inv, counts = torch.unique(pos, return_inverse=True, return_counts=True)
    for k in mirror.keys():
        g = got[k].reshape(len(pos), -1)
        s = sub[k].reshape(len(pos), -1)
        for j in range(len(pos)):
            if counts[inv[j]] == 1:
                expect(torch.equal(g[j], s[j]), f"{what}: {k} row {int(pos[j])}")
            else:
                same = (pos == pos[j]).nonzero().reshape(-1)
                expect(any(torch.equal(g[j], s[i]) for i in same.tolist()),
                       f"{what}: {k} row {int(pos[j])}")
        mirror[k][pos] = g


# ---- the seed's 19 cases over both Python sides ------------------------------------

class SeedCases:
    def __init__(self, env, tag):
        import tdstore
        from tensordict import TensorDict

        g = torch.Generator().manual_seed(13)
        self.idx_int = 42
        self.idx_slice = slice(100, 356)
        self.idx_step = slice(0, N, 3)
        self.idx_fancy = torch.randint(0, N, (256,), generator=g)
        self.idx_bool = torch.zeros(N, dtype=torch.bool)
        self.idx_bool[torch.randperm(N, generator=g)[:256]] = True
        src = {f"key_{i}": torch.randn(N, FEAT, generator=g) for i in range(N_KEYS)}
        self.new_key0 = torch.randn(N, FEAT, generator=g)

        def sub(n):
            shape = [n] if n is not None else []
            return TensorDict({f"key_{i}": torch.randn(*shape, FEAT, generator=g)
                               for i in range(N_KEYS)}, shape)

        self.subs = {"int": sub(None), "slice": sub(256), "step": sub(len(range(0, N, 3))),
                     "fancy": sub(256), "bool": sub(256)}
        self.td = {"seed": seed_store(env, [N], f"seedbench_{tag}"),
                   "tds": tdstore.TensorDictStore(batch_size=[N], addr=env.addr,
                                                  name=f"seedbench_{tag}")}
        self.mirror = {}
        for s, td in self.td.items():
            for k, v in src.items():  # as the seed script fills its store: key by key
                td[k] = v
            self.mirror[s] = {k: v.clone() for k, v in src.items()}

    def op(self, name, side):
        """(timed call, check) of one case on one side."""
        td, m = self.td[side], self.mirror[side]
        reads = {"read td[int]": self.idx_int, "read td[slice]": self.idx_slice,
                 "read td[::3]": self.idx_step, "read td[fancy]": self.idx_fancy,
                 "read td[bool]": self.idx_bool}
        writes = {"write td[int]=v": (self.idx_int, "int"),
                  "write td[slice]=v": (self.idx_slice, "slice"),
                  "write td[::3]=v": (self.idx_step, "step"),
                  "write td[fancy]=v": (self.idx_fancy, "fancy"),
                  "write td[bool]=v": (self.idx_bool, "bool")}
        # .to_td() in the seed's names is .to_tensordict()
        to_td = {"td[int].to_td()": self.idx_int, "td[slice].to_td()": self.idx_slice,
                 "td[fancy].to_td()": self.idx_fancy}
        if name == "get single key":
            return (lambda: td["key_0"],
                    lambda: expect(torch.equal(td["key_0"], m["key_0"]), name))
        if name == "set single key":
            v = self.new_key0

            def check():
                td.__setitem__("key_0", v)
                m["key_0"] = v.clone()
                expect(torch.equal(td["key_0"], v), name)
            return (lambda: td.__setitem__("key_0", v)), check
        if name == "keys() iteration":
            return (lambda: list(td.keys()),
                    lambda: expect(sorted(td.keys()) == sorted(m), name))
        if name == "values() iteration":
            def check():
                keys, vals = list(td.keys()), list(td.values())
                check_leaves(dict(zip(keys, vals)), m, None, name)
            return (lambda: list(td.values())), check
        if name == "items() iteration":
            return (lambda: list(td.items()),
                    lambda: check_leaves(dict(td.items()), m, None, name))
        if name in reads:
            idx = reads[name]
            return (lambda: td[idx]), (lambda: check_leaves(td[idx], m, idx, name))
        if name in writes:
            idx, which = writes[name]
            value = self.subs[which]

            def write():
                td[idx] = value

            def check():
                write()
                check_write(td, m, idx, value, name)
            return write, check
        if name == "to_tensordict()":
            return (lambda: td.to_tensordict(),
                    lambda: check_leaves(td.to_tensordict(), m, None, name))
        if name in to_td:
            idx = to_td[name]
            return ((lambda: td[idx].to_tensordict()),
                    lambda: check_leaves(td[idx].to_tensordict(), m, idx, name))
        raise KeyError(name)

    def close(self):
        self.td["tds"].drop()
        self.td["seed"].clear_redis()
        self.td["seed"].close()


def reps_of(name, quick):
    heavy = ("::3" in name or name in ("values() iteration", "items() iteration",
                                        "to_tensordict()", "get single key", "set single key"))
    if quick:
        return 4 if heavy else 20
    return 20 if heavy else 60


def timed_blocks(calls, order, reps, out):
    """calls[side]() timed reps times per side, in blocks A B B A."""
    half = max(1, reps // 2)
    for side in (order[0], order[1], order[1], order[0]):
        fn = calls[side]
        for _ in range(half):
            t0 = time.perf_counter()
            fn()
            out[side].append(time.perf_counter() - t0)


def seed_round(cases, rnd, quick, res):
    order = SIDES if rnd % 2 == 0 else SIDES[::-1]
    for name, _ in CASES:
        calls = {}
        for side in order:
            fn, check = cases.op(name, side)
            check()  # untimed: the right bytes
            for _ in range(WARMUP):
                fn()
            calls[side] = fn
        lat = {s: [] for s in SIDES}
        timed_blocks(calls, order, reps_of(name, quick), lat)
        for s in SIDES:
            res[name][s].append(statistics.median(lat[s]) * 1e3)
    log("  seed cases: " + "; ".join(
        f"{n} {res[n]['seed'][-1]:.3f}/{res[n]['tds'][-1]:.3f}" for n, _ in CASES[:6]) + " ...")


# ---- replay and bulk rows ------------------------------------------------------------

class ReplayBulk:
    def __init__(self, env, sizes, tag):
        import tdstore
        from tensordict import TensorDict

        self.env = env
        self.sizes = sizes
        n = sizes["rows"]
        g = torch.Generator().manual_seed(46)
        self.values = {"obs": torch.rand(n, 84, generator=g),
                       "action": torch.rand(n, 6, generator=g),
                       "reward": torch.rand(n, generator=g),
                       "done": torch.rand(n, generator=g) < 0.01}
        self.rep = {"seed": seed_store(env, [n], f"seedbench_replay_{tag}"),
                    "tds": tdstore.TensorDictStore(batch_size=[n], addr=env.addr,
                                                   name=f"seedbench_replay_{tag}")}
        for td in self.rep.values():
            for k, v in self.values.items():
                td[k] = v
        self.samples = [torch.randint(0, n, (pb.SAMPLE,), generator=g)
                        for _ in range(sizes["sample_iters"])]
        self.row_pos = torch.randint(0, n, (sizes["write_iters"],), generator=g).tolist()
        self.row = TensorDict({"obs": torch.rand(84, generator=g),
                               "action": torch.rand(6, generator=g),
                               "reward": torch.rand((), generator=g),
                               "done": torch.tensor(True)}, [])
        rows = sizes["bulk_bytes"] // (pb.ROW_FLOATS * 4)
        self.src = torch.rand(rows, pb.ROW_FLOATS, generator=g)
        self.bulk = {"seed": seed_store(env, [rows], f"seedbench_bulk_{tag}"),
                     "tds": tdstore.TensorDictStore(batch_size=[rows], addr=env.addr,
                                                    name=f"seedbench_bulk_{tag}")}
        for td in self.bulk.values():
            td["x"] = self.src

    def check(self, side):
        td = self.rep[side]
        idx = self.samples[0]
        out = td[idx]
        for k, t in self.values.items():
            expect(torch.equal(out[k], t[idx]), f"sample through {side}: {k}")
        i = self.row_pos[0]
        td[i] = self.row
        got = td[i]
        for k in self.values:
            expect(torch.equal(got[k], self.row[k]), f"row write through {side}: {k}")
            self.values[k][i] = self.row[k]

    def round(self, rnd, res):
        order = SIDES if rnd % 2 == 0 else SIDES[::-1]
        for s in order:
            self.check(s)
        # Blocks A B B A; each side runs the first half of the list, then the
        # second: both sides do the same calls (and write the same rows).
        blocks = ((order[0], 0), (order[1], 0), (order[1], 1), (order[0], 1))
        lat = {s: [] for s in SIDES}
        per = max(1, len(self.samples) // 2)
        for side, half in blocks:
            td = self.rep[side]
            td[self.samples[0]]  # warm-up
            for idx in self.samples[half * per:(half + 1) * per]:
                t0 = time.perf_counter()
                td[idx]
                lat[side].append(time.perf_counter() - t0)
        for s in SIDES:
            res["sample"][s].append(pb.percentile(sorted(x * 1e3 for x in lat[s]), 50))
        lat = {s: [] for s in SIDES}
        per = max(1, len(self.row_pos) // 2)
        row = self.row
        for side, half in blocks:
            td = self.rep[side]
            for i in self.row_pos[half * per:(half + 1) * per]:
                t0 = time.perf_counter()
                td[i] = row
                lat[side].append(time.perf_counter() - t0)
        for k in self.values:  # the mirror: both sides wrote row at every position
            self.values[k][torch.tensor(self.row_pos)] = row[k]
        for s in SIDES:
            res["write_row"][s].append(pb.percentile(sorted(x * 1e3 for x in lat[s]), 50))
        # Streaming appends: the same row written at consecutive positions, one
        # row at a time, as a collector does. tdstore streams them through one
        # appender (flushed at the end: every row acknowledged); the seed has
        # no stream, so its rows go one call each. Rows/s, sides A B B A.
        k = len(self.row_pos) // 2  # rows per block; each side writes rows [0, 2k) of its store
        for side, half in blocks:
            td = self.rep[side]
            start, stop = half * k, (half + 1) * k
            t0 = time.perf_counter()
            if side == "tds":
                with td.appender(list(self.values)) as out:
                    for i in range(start, stop):
                        out[i] = row
            else:
                for i in range(start, stop):
                    td[i] = row
            res["stream"][side].append((stop - start) / (time.perf_counter() - t0))
        for name, v in self.values.items():  # the mirror
            v[0:2 * k] = row[name]
        # bulk: put then get, sides alternating A B B A
        nbytes = self.src.numel() * 4
        for rep in range(self.sizes["bulk_reps"]):
            for side in order if rep % 2 == 0 else order[::-1]:
                td = self.bulk[side]
                self.env.settle()
                t0 = time.perf_counter()
                td["x"] = self.src
                res["put"][side].append(nbytes / (time.perf_counter() - t0) / 1e6)
                self.env.settle()
                t0 = time.perf_counter()
                got = td["x"]
                res["get"][side].append(nbytes / (time.perf_counter() - t0) / 1e6)
                expect(torch.equal(got, self.src), f"bulk get through {side}")  # untimed
                del got
        log("  replay/bulk: " + "; ".join(
            f"{s}: sample {res['sample'][s][-1]:.3f} ms, row {res['write_row'][s][-1]:.3f} ms, "
            f"put {res['put'][s][-1]:.0f} get {res['get'][s][-1]:.0f} MB/s" for s in order))

    def close(self):
        for d in (self.rep, self.bulk):
            d["tds"].drop()
            d["seed"].clear_redis()
            d["seed"].close()


# ---- the C++ client --------------------------------------------------------------------

def cpp_round(env, sizes, runs, errors):
    """One tdstore-bench run; a row it could not measure stays empty (its
    error goes to errors and under the table)."""
    label = f"{sizes['bulk_bytes'] >> 20}MiB"
    t0 = time.time()
    got = pb.tdstore_bench(env, ["a.", f"b.put_{label}", f"b.get_{label}", "c.sample256",
                                 "c.write_row"], bench=env.args.bench, errors=errors)
    run = {}
    for (scen, metric), r in got.items():
        run[f"{scen}|{metric}"] = {"tdstore": r["tdstore"], "raw": r["raw"]}
    runs.append(run)
    log(f"  C++ (tdstore-bench, {time.time() - t0:.0f} s): " + "; ".join(
        f"{k.split('|')[0]} {v['tdstore']:.3f}/{v['raw']:.3f}" for k, v in list(run.items())[:5])
        + " ...")


# ---- the table ------------------------------------------------------------------------------

def fmt(v):
    if v != v:
        return ""
    if v >= 100:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def cpp_list(runs, scenario, metric, which, scale=1.0):
    """A C++ figure per round (nan where that run could not measure it)."""
    nan = float("nan")
    return [r.get(f"{scenario}|{metric}", {}).get(which, nan) * scale for r in runs]


def paired(num, den):
    """The median over rounds of num[i] / den[i]: each round timed every
    side, so a ratio pairs figures of the same machine state (the medians of
    each side, divided, need not: a side's slow round and the other's fast
    one may make the ratio)."""
    xs = [a / b for a, b in zip(num, den) if a == a and b == b and b != 0]
    return f"{statistics.median(xs):.2f}x" if xs else ""


def build_rows(res, rb, cpp_runs, label):
    nan = float("nan")
    def med(xs):  # over the rounds that measured it
        xs = [x for x in xs if x == x]
        return statistics.median(xs) if xs else nan
    rows = []
    for name, cpp_row in CASES:
        sl, tl = res[name]["seed"], res[name]["tds"]
        cl = cpp_list(cpp_runs, cpp_row, "p50 ms", "tdstore") if cpp_row else []
        rl = cpp_list(cpp_runs, cpp_row, "p50 ms", "raw") if cpp_row else []
        rows.append({"case": f"{name}, ms" + (f" ({cpp_row})" if cpp_row else ""),
                     "seed": med(sl), "tds": med(tl), "cpp": med(cl), "raw": med(rl),
                     "py_vs_seed": paired(sl, tl), "cpp_vs_seed": paired(sl, cl),
                     "cpp_vs_raw": paired(rl, cl)})
    for key, title, scen, metric in (
            ("write_row", "replay: write 1 row x 4 leaves p50, ms", "c.write_row", "p50 ms"),
            ("sample", "replay: sample 256 rows x 4 leaves p50, ms", "c.sample256", "p50 ms"),
            ("sample", "replay: the same sample from a record dict (C++ only; Python: "
                       "record_layout_bench.py), ms", "c.sample256_record", "p50 ms")):
        sl, tl = rb[key]["seed"], rb[key]["tds"]
        if scen == "c.sample256_record":
            tl = []  # the Python side samples the default layout here
        cl, rl = cpp_list(cpp_runs, scen, metric, "tdstore"), cpp_list(cpp_runs, scen, metric, "raw")
        rows.append({"case": f"{title} ({scen})", "seed": med(sl), "tds": med(tl),
                     "cpp": med(cl), "raw": med(rl),
                     "py_vs_seed": paired(sl, tl), "cpp_vs_seed": paired(sl, cl),
                     "cpp_vs_raw": paired(rl, cl)})
    sl, tl = rb["stream"]["seed"], rb["stream"]["tds"]
    rows.append({"case": "streaming appends: 1 row x 4 leaves at a time, rows/s (seed: one call "
                         "per row)", "seed": med(sl), "tds": med(tl), "cpp": nan, "raw": nan,
                 "py_vs_seed": paired(tl, sl), "cpp_vs_seed": "", "cpp_vs_raw": ""})
    for key, title, scen in (("get", f"bulk get {label}, MB/s", f"b.get_{label.replace(' ', '')}"),
                             ("put", f"bulk put {label}, MB/s", f"b.put_{label.replace(' ', '')}")):
        sl, tl = rb[key]["seed"], rb[key]["tds"]
        cl = cpp_list(cpp_runs, scen, "GB/s", "tdstore", 1e3)
        rl = cpp_list(cpp_runs, scen, "GB/s", "raw", 1e3)
        # throughput: higher is better, so the ratios are tdstore / seed and tdstore / raw
        rows.append({"case": f"{title} ({scen})", "seed": med(sl), "tds": med(tl),
                     "cpp": med(cl), "raw": med(rl),
                     "py_vs_seed": paired(tl, sl), "cpp_vs_seed": paired(cl, sl),
                     "cpp_vs_raw": paired(cl, rl)})
    return rows


def markdown(rows, cpp_runs):
    out = ["| case | seed | tdstore Python | C++ | raw ideal | Python vs seed | C++ vs seed "
           "| C++ vs raw |", "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        out.append(f"| {r['case']} | {fmt(r['seed'])} | {fmt(r['tds'])} | {fmt(r['cpp'])} | "
                   f"{fmt(r['raw'])} | {r['py_vs_seed']} | {r['cpp_vs_seed']} | {r['cpp_vs_raw']} |")
    out += ["", "C++-only rows of tdstore-bench (no seed case), p50 ms:", "",
            "| row | C++ | raw ideal | C++ vs raw |", "|---|--:|--:|--:|"]
    for name in CPP_ONLY:
        cl = cpp_list(cpp_runs, name, "p50 ms", "tdstore")
        rl = cpp_list(cpp_runs, name, "p50 ms", "raw")
        known = lambda xs: [x for x in xs if x == x]  # noqa: E731
        c, r = known(cl), known(rl)
        out.append(f"| {name} | {fmt(statistics.median(c) if c else float('nan'))} | "
                   f"{fmt(statistics.median(r) if r else float('nan'))} | {paired(rl, cl)} |")
    return out


# ---- profile ------------------------------------------------------------------------------

def profile_worst(cases, rows, n=2):
    """cProfile, by cumulative time, of the n cases where tdstore.TensorDictStore
    is furthest behind the seed."""
    scored = []
    for r in rows[:len(CASES)]:
        if r["py_vs_seed"]:
            scored.append((float(r["py_vs_seed"][:-1]), r["case"].split(", ms")[0]))
    out = {}
    for _, name in sorted(scored)[:n]:
        fn, _ = cases.op(name, "tds")
        out[name] = pb.profile_calls(lambda i: fn(), reps_of(name, False), top=25,
                                     sort="cumulative")
    return out


# ---- main ---------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, under 2 minutes")
    ap.add_argument("--repeats", type=int, default=None, help="rounds; default 3, quick 1")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--unix", action="store_true", help="clients -> tdstored over its unix socket")
    ap.add_argument("--redis-unix", action="store_true",
                    help="tdstored and the seed -> Redis over its unix socket, not loopback TCP")
    ap.add_argument("--cluster", action="store_true",
                    help="a 3-master (+3 replica) loopback Redis Cluster instead of one redis-server")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the two cases where tdstore Python trails the seed most")
    ap.add_argument("--tdstored", default=os.path.join(REPO, "build/server/tdstored"))
    ap.add_argument("--bench", default=os.path.join(REPO, "build/tests/bench/tdstore-bench"),
                    help="the tdstore-bench binary (the C++ side)")
    ap.add_argument("--redis-server", default=pb.shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    args.cpp_bench = args.bench
    repeats = args.repeats or (1 if args.quick else 3)
    sizes = ({"bulk_bytes": 16 * MiB, "rows": 100_000, "sample_iters": 100, "write_iters": 200,
              "bulk_reps": 2} if args.quick else
             {"bulk_bytes": 256 * MiB, "rows": 1_000_000, "sample_iters": 1000,
              "write_iters": 2000, "bulk_reps": 3})
    label = f"{sizes['bulk_bytes'] >> 20} MiB"
    torch.set_num_threads(1)  # as tdstore-bench: the cores belong to what is measured
    load_start = pb.loadavg()
    started = time.time()
    log(f"load average at start: {load_start}")

    env = (ClusterEnv if args.cluster else pb.Env)(args)
    cases = rb = None
    res = {name: {s: [] for s in SIDES} for name, _ in CASES}
    rbres = {k: {s: [] for s in SIDES} for k in ("sample", "write_row", "stream", "put", "get")}
    cpp_runs, loads, profiles, cpp_errors = [], [], {}, {}
    try:
        env.start()
        tag = str(os.getpid())
        log("filling (seed cases, replay buffer, bulk leaf; seed and tdstore Python) ...")
        cases = SeedCases(env, tag)
        rb = ReplayBulk(env, sizes, tag)
        for rnd in range(repeats):
            loads.append(pb.loadavg())
            log(f"round {rnd + 1}/{repeats} (load {loads[-1]})")
            cpp_first = rnd % 2 == 0
            if cpp_first:
                cpp_round(env, sizes, cpp_runs, cpp_errors)
            gc.collect()
            seed_round(cases, rnd, args.quick, res)
            rb.round(rnd, rbres)
            if not cpp_first:
                cpp_round(env, sizes, cpp_runs, cpp_errors)
        rows = build_rows(res, rbres, cpp_runs, label)
        if args.profile:
            profiles = profile_worst(cases, rows)
    finally:
        for x in (cases, rb):
            if x is not None:
                try:
                    x.close()
                except Exception as e:  # noqa: BLE001 - cleanup only
                    log(f"cleanup: {e}")
        env.stop()
    load_end = pb.loadavg()
    backend = "Redis Cluster (3 masters + 3 replicas)" if args.cluster else "standalone Redis"
    transport = "unix socket" if args.unix else "TCP"
    head = [f"Command: {' '.join([sys.executable] + sys.argv)}",
            f"Load average: start {load_start}, end {load_end}; per round: {', '.join(loads)}",
            f"{backend}, clients -> tdstored over {transport}; {repeats} rounds, "
            f"{time.time() - started:.0f} s; figures: medians over rounds; ratios: the median of "
            f"the rounds' own ratios (each round times every side), > 1: tdstore ahead",
            ""]
    table = markdown(rows, cpp_runs)
    if cpp_errors:
        table += [""] + [f"tdstore-bench could not measure {k}: {v}" for k, v in cpp_errors.items()]
    print("\n" + "\n".join(head + table))
    for name, text in profiles.items():
        print(f"\n---- cProfile of tdstore.TensorDictStore: {name} (cumulative) ----\n{text}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(head + table) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": head[0], "date": time.strftime("%F %T"), "backend": backend,
                       "transport": transport, "repeats": repeats, "sizes": sizes,
                       "load_start": load_start, "load_end": load_end, "load_per_round": loads,
                       "rows": rows, "seed_cases_ms_per_round": res, "replay_bulk_per_round": rbres,
                       "cpp_runs": cpp_runs, "cpp_errors": cpp_errors, "profiles": profiles, "table": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
