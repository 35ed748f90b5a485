#!/usr/bin/env python3
"""tdstore through Python against the C++ client and the seed, in one run.

Issue #12 item 5: bulk get/put of 256 MiB through Python >= 0.9x the C++
client's GB/s, and a 256-row sample of 4 leaves through Python within 50 us
of the C++ client's p50 -- measured in the same run, on the same Redis and
the same tdstored. Also measured: the seed, tensordict's own
``tensordict.store.TensorDictStore`` over redis-py, on the same Redis.

    /tmp/pyenv/bin/python tests/bench/python_bench.py            # full: 3 rounds, ~7 min
    /tmp/pyenv/bin/python tests/bench/python_bench.py --quick    # small, < 1 min
    ... --repeats 5 --json out.json --unix --profile

The script starts its own redis-server (loopback, free port, no persistence)
and its own tdstored (--listen 127.0.0.1:0, plus a unix socket), then runs
``--repeats`` rounds. Each round runs the C++ client (``tdstore-bench --addr
... --scenario b.put_256MiB --scenario b.get_256MiB --scenario c.sample256
--repeats 1``, which does the work below and also a raw hiredis baseline) and
one Python round; which goes first alternates (A B B A ...). Inside a Python
round the three Python sides (native module, tdstore.TensorDictStore, seed)
alternate too, and their order rotates from round to round.

The work is the C++ benchmark's (tests/bench/scenario_bulk.cc,
scenario_replay.cc):
  bulk   one float32 leaf [65536, 1024] = 256 MiB (--quick: [4096, 1024] =
         16 MiB) in tdstored's default layout; put = replace the leaf, get =
         read it into fresh memory. Before every timed transfer: wait until
         Redis has no lazyfree pending, then MEMORY PURGE (as the C++ side).
         3 puts and 3 gets per side per round; GB/s = 1e9 bytes/s.
  sample a dict of 1,000,000 rows (--quick 100,000): obs [N,84] f32, action
         [N,6] f32, reward [N] f32, done [N] bool; 256 uniformly random rows
         (with replacement) of all 4 leaves, 1000 samples per side per round
         (--quick 100), one untimed warm-up; p50/p99 per round, the figure is
         the median over rounds (the C++ figure: the median over its
         invocations, one run of 1000 samples each).
Figures: medians over all rounds. Python (native) calls tdstore._native
directly (read/write + torch.frombuffer), Python (TensorDictStore) is
``td["x"] = t`` / ``td["x"]`` / ``td[idx]``, seed is the same calls on
tensordict's TensorDictStore (its metadata cache on, as by default).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import os
import pstats
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MiB = 1 << 20
ROW_FLOATS = 1024
SAMPLE = 256
LEAVES = (("obs", (84,), torch.float32), ("action", (6,), torch.float32),
          ("reward", (), torch.float32), ("done", (), torch.bool))
DT_NAMES = {torch.float32: "float32", torch.bool: "bool"}
DT_OF = {"float32": torch.float32, "bool": torch.bool}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadavg() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


# ---- process CPU figures ------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except OSError:
        return float("nan")


def machine_busy() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / _TICK


class Meter:
    """CPU seconds of the client (this process), tdstored, Redis and the whole
    machine over a timed phase; accumulates over phases."""

    def __init__(self, env):
        self.env = env
        self.wall = self.client = self.daemon = self.redis = self.machine = 0.0

    def __enter__(self):
        self._t = (time.perf_counter(), time.process_time(), proc_cpu(self.env.daemon_pid),
                   proc_cpu(self.env.redis_pid), machine_busy())
        return self

    def __exit__(self, *exc):
        t = (time.perf_counter(), time.process_time(), proc_cpu(self.env.daemon_pid),
             proc_cpu(self.env.redis_pid), machine_busy())
        self.wall += t[0] - self._t[0]
        self.client += t[1] - self._t[1]
        self.daemon += t[2] - self._t[2]
        self.redis += t[3] - self._t[3]
        self.machine += t[4] - self._t[4]

    def cpu(self) -> dict:
        if self.wall <= 0:
            return {}
        w = self.wall
        others = self.machine - self.client - self.daemon - self.redis
        return {"client": round(100 * self.client / w), "tdstored": round(100 * self.daemon / w),
                "redis": round(100 * self.redis / w), "others": max(0, round(100 * others / w))}


# ---- the servers --------------------------------------------------------------

class Env:
    def __init__(self, args):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="tdstore-pybench-")
        self.redis_proc = None
        self.daemon_proc = None
        self.redis_port = 0
        self.redis_pid = 0
        self.daemon_pid = 0
        self.tcp_addr = ""
        self.unix_addr = ""
        self.redis_url = ""
        # With --redis-unix, redis-server also listens on this unix socket,
        # and tdstored uses it instead of loopback TCP (so do seed_bench's
        # seed and its raw ideal; replay_bench has no --redis-unix).
        self.redis_socket = (os.path.join(self.dir, "redis.sock")
                             if getattr(args, "redis_unix", False) else "")
        self.nodes = []  # redis-py clients of every Redis node (settle() visits each)

    @property
    def addr(self) -> str:
        return self.unix_addr if self.args.unix else self.tcp_addr

    def start(self):
        self.start_redis()
        self.start_daemon()

    def start_redis(self):
        """One redis-server; sets redis_url (tdstored's --redis), r and nodes."""
        import redis

        self.redis_port = free_port()
        self.redis_proc = subprocess.Popen(
            [self.args.redis_server, "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir,
             "--logfile", os.path.join(self.dir, "redis.log"), "--daemonize", "no"]
            + (["--unixsocket", self.redis_socket, "--unixsocketperm", "700"]
               if self.redis_socket else []),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.redis_pid = self.redis_proc.pid
        self.r = redis.Redis(host="127.0.0.1", port=self.redis_port)
        deadline = time.time() + 20
        while True:
            try:
                self.r.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.time() > deadline or self.redis_proc.poll() is not None:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)
        self.redis_url = (f"unix://{self.redis_socket}" if self.redis_socket
                          else f"redis://127.0.0.1:{self.redis_port}")
        self.nodes = [self.r]

    def start_daemon(self):
        """tdstored over redis_url, on loopback TCP and a unix socket."""
        ready = os.path.join(self.dir, "ready")
        # A launcher before the binary (call_cpu.py --callgrind: valgrind).
        launcher = list(getattr(self.args, "tdstored_launcher", None) or [])
        self.daemon_proc = subprocess.Popen(
            launcher + [self.args.tdstored, "--listen", "127.0.0.1:0", "--redis", self.redis_url,
             "--unix-socket", os.path.join(self.dir, "td.sock"), "--ready-file", ready,
             "--log-level", "warning"],
            stdout=open(os.path.join(self.dir, "tdstored.log"), "w"), stderr=subprocess.STDOUT)
        self.daemon_pid = self.daemon_proc.pid
        deadline = time.time() + 30
        while not (os.path.exists(ready) and os.path.getsize(ready) > 0):
            if time.time() > deadline or self.daemon_proc.poll() is not None:
                raise RuntimeError("tdstored did not start; log: " +
                                   open(os.path.join(self.dir, "tdstored.log")).read()[-2000:])
            time.sleep(0.05)
        time.sleep(0.05)
        lines = [l.strip() for l in open(ready) if l.strip()]
        self.tcp_addr = next(l for l in lines if not l.startswith("unix:"))
        self.unix_addr = next((l for l in lines if l.startswith("unix:")), "")
        if self.args.unix and not self.unix_addr:
            raise RuntimeError("tdstored announced no unix socket")
        log(f"redis-server pid {self.redis_pid} port {self.redis_port}; tdstored pid "
            f"{self.daemon_pid} at {self.tcp_addr} and {self.unix_addr}; client uses {self.addr}")

    def stop(self):
        for p in (self.daemon_proc, self.redis_proc):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def settle(self):
        """As scenario_bulk.cc: Redis has freed what earlier calls deleted, and
        has given freed memory back (no side inherits the other's page faults)."""
        deadline = time.time() + 60
        for node in self.nodes:
            while int(node.info("memory").get("lazyfree_pending_objects", 0)) > 0:
                if time.time() > deadline:
                    break
                time.sleep(0.005)
            node.execute_command("MEMORY", "PURGE")


# ---- the C++ client -----------------------------------------------------------

def tdstore_bench(env, scenarios, bench=None, errors=None):
    """One ``tdstore-bench --addr`` run (``--repeats 1``) against env's tdstored
    and Redis; returns its JSON rows keyed by (scenario, metric). With a dict
    ``errors``, a run where some rows failed still returns the others, and
    errors[scenario] says why each failed one did."""
    js = os.path.join(env.dir, "cpp.json")
    cmd = [bench or env.args.cpp_bench, "--addr", env.addr, "--redis", env.redis_url,
           "--daemon-pid", str(env.daemon_pid), "--repeats", "1", "--json", js]
    for s in scenarios:
        cmd += ["--scenario", s]
    if env.args.quick:
        cmd.append("--quick")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = p.returncode == 1 and errors is not None  # 1: some scenario failed
    if (p.returncode != 0 and not partial) or not os.path.exists(js):
        log(p.stdout[-3000:], p.stderr[-3000:])
        raise RuntimeError(f"tdstore-bench failed ({p.returncode})")
    with open(js) as f:
        data = json.load(f)
    os.remove(js)
    rows = {}
    for r in data["results"]:
        if r.get("error"):
            errors[r["scenario"]] = r["error"]
            log(f"  tdstore-bench: {r['scenario']} failed: {r['error']}")
        else:
            rows[(r["scenario"], r["metric"])] = r
    return rows


def run_cpp(env, sizes, out_runs):
    label = f"{sizes['bulk_bytes'] >> 20}MiB"
    t0 = time.time()
    got = tdstore_bench(env, [f"b.put_{label}", f"b.get_{label}", "c.sample256"])
    run = {
        "put": got[(f"b.put_{label}", "GB/s")]["tdstore"],
        "get": got[(f"b.get_{label}", "GB/s")]["tdstore"],
        "raw_put": got[(f"b.put_{label}", "GB/s")]["raw"],
        "raw_get": got[(f"b.get_{label}", "GB/s")]["raw"],
        "p50": got[("c.sample256", "p50 ms")]["tdstore"],
        # client CPU per call (the client process: libtorch client + core)
        "cpu_us_sample": 1e6 * got[("c.sample256", "p50 ms")]["tdstore_side"]["client_cpu_seconds"]
        / max(1, got[("c.sample256", "p50 ms")]["tdstore_side"]["ops"]),
        "cpu_s_put": got[(f"b.put_{label}", "GB/s")]["tdstore_side"]["client_cpu_seconds"]
        / max(1, got[(f"b.put_{label}", "GB/s")]["tdstore_side"]["ops"]),
        "cpu_s_get": got[(f"b.get_{label}", "GB/s")]["tdstore_side"]["client_cpu_seconds"]
        / max(1, got[(f"b.get_{label}", "GB/s")]["tdstore_side"]["ops"]),
        "p99": got[("c.sample256", "p99 ms")]["tdstore"],
        "raw_p50": got[("c.sample256", "p50 ms")]["raw"],
        "raw_p99": got[("c.sample256", "p99 ms")]["raw"],
        "seconds": time.time() - t0,
    }
    out_runs.append(run)
    log(f"  C++ client: put {run['put']:.3f} GB/s, get {run['get']:.3f} GB/s, sample p50 "
        f"{run['p50']:.3f} ms p99 {run['p99']:.3f} ms (raw: {run['raw_put']:.3f} / "
        f"{run['raw_get']:.3f} GB/s, {run['raw_p50']:.3f} ms) [{run['seconds']:.0f} s]")


# ---- the Python sides ---------------------------------------------------------

class Sides:
    """The three Python sides over the same tdstored / Redis."""

    def __init__(self, env, sizes):
        import tdstore
        from tdstore import _native
        from tensordict.store import TensorDictStore as SeedStore

        self.env = env
        self.sizes = sizes
        tag = str(os.getpid())
        self.native_client = _native.Client(env.addr)
        self.names = []

        # -- bulk --
        rows = sizes["bulk_bytes"] // (ROW_FLOATS * 4)
        self.src = torch.rand(rows, ROW_FLOATS)
        self.src_leaf = (("x",), "float32", tuple(self.src.shape), self.src.data_ptr(),
                         self.src.numel() * self.src.element_size())
        name = f"pybench_bulk_native_{tag}"
        self.names.append(name)
        self.bulk_native = self.native_client.create(name, [rows])
        self.bulk_native.write([self.src_leaf])
        name = f"pybench_bulk_tds_{tag}"
        self.names.append(name)
        self.bulk_tds = tdstore.TensorDictStore(batch_size=[rows], addr=env.addr, name=name)
        self.bulk_tds["x"] = self.src
        self.bulk_seed = SeedStore(host="127.0.0.1", port=env.redis_port, batch_size=[rows],
                                   prefix=f"pybench_seed_bulk_{tag}")
        self.bulk_seed["x"] = self.src

        # -- replay buffer --
        n = sizes["rows"]
        g = torch.Generator().manual_seed(45)
        self.values = {"obs": torch.rand(n, 84, generator=g), "action": torch.rand(n, 6, generator=g),
                       "reward": torch.rand(n, generator=g),
                       "done": torch.rand(n, generator=g) < 0.01}
        name = f"pybench_replay_native_{tag}"
        self.names.append(name)
        self.rep_native = self.native_client.create(name, [n])
        self.rep_native.write([((k,), DT_NAMES[t.dtype], tuple(t.shape), t.data_ptr(),
                                t.numel() * t.element_size()) for k, t in self.values.items()])
        name = f"pybench_replay_tds_{tag}"
        self.names.append(name)
        self.rep_tds = tdstore.TensorDictStore(batch_size=[n], addr=env.addr, name=name)
        self.rep_tds.update(self.values)
        self.rep_seed = SeedStore(host="127.0.0.1", port=env.redis_port, batch_size=[n],
                                  prefix=f"pybench_seed_replay_{tag}")
        for k, t in self.values.items():
            self.rep_seed[k] = t
        self.samples = [torch.randint(0, n, (SAMPLE,), generator=g, dtype=torch.int64)
                        for _ in range(sizes["sample_iters"])]
        self.check()

    # bulk
    def put(self, side):
        if side == "native":
            self.bulk_native.write([self.src_leaf])
        elif side == "tds":
            self.bulk_tds["x"] = self.src
        else:
            self.bulk_seed["x"] = self.src

    def get(self, side):
        if side == "native":
            _, leaves = self.bulk_native.read([("x",)], None, ("x",))
            _, dt, shape, buf = leaves[0]
            return torch.frombuffer(buf, dtype=DT_OF[dt]).view(shape)
        if side == "tds":
            return self.bulk_tds["x"]
        return self.bulk_seed["x"]

    # sample
    def sample(self, side, idx):
        if side == "native":
            _, leaves = self.rep_native.read([], [("positions", idx.data_ptr(), SAMPLE, (SAMPLE,))])
            return {p[-1]: torch.frombuffer(b, dtype=DT_OF[dt]).view(shape)
                    for p, dt, shape, b in leaves}
        if side == "tds":
            return self.rep_tds[idx]
        return self.rep_seed[idx]

    def check(self):
        for side in SIDES:
            got = self.get(side)
            if not torch.equal(got, self.src):
                raise RuntimeError(f"bulk get through {side} returned different data")
            del got
            idx = self.samples[0]
            out = self.sample(side, idx)
            for k, t in self.values.items():
                if not torch.equal(out[k], t[idx]):
                    raise RuntimeError(f"sample through {side}: leaf {k} differs")

    def close(self):
        for name in self.names:
            try:
                self.native_client.drop(name)
            except Exception:  # noqa: BLE001 - cleanup only
                pass
        for s in (self.bulk_seed, self.rep_seed):
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass


SIDES = ("native", "tds", "seed")
SIDE_TITLES = {"native": "Python (native)", "tds": "Python (TensorDictStore)", "seed": "seed"}


def python_round(env, sides, rnd, res):
    order = SIDES[rnd % 3:] + SIDES[:rnd % 3]
    if rnd % 2:
        order = order[::-1]
    nbytes = sides.sizes["bulk_bytes"]
    for rep in range(sides.sizes["bulk_reps"]):
        for side in order if rep % 2 == 0 else order[::-1]:
            env.settle()
            with res[side]["put_meter"]:
                t0 = time.perf_counter()
                sides.put(side)
                dt = time.perf_counter() - t0
            res[side]["put"].append(nbytes / dt / 1e9)
            res[side]["put_n"] += 1
            env.settle()
            with res[side]["get_meter"]:
                t0 = time.perf_counter()
                got = sides.get(side)
                dt = time.perf_counter() - t0
            res[side]["get"].append(nbytes / dt / 1e9)
            res[side]["get_n"] += 1
            del got
    # Sampling: blocks of samples, the sides taking turns.
    iters = sides.sizes["sample_iters"]
    blocks = 4 if iters >= 400 else 1
    per = iters // blocks
    lat = {s: [] for s in SIDES}
    for s in order:
        sides.sample(s, sides.samples[0])  # warm-up, untimed
    for b in range(blocks):
        for side in order if b % 2 == 0 else order[::-1]:
            chunk = sides.samples[b * per:(b + 1) * per]
            out = lat[side]
            with res[side]["sample_meter"]:
                for idx in chunk:
                    t0 = time.perf_counter()
                    sides.sample(side, idx)
                    out.append(time.perf_counter() - t0)
            res[side]["sample_n"] += len(chunk)
    for side in SIDES:
        ms = sorted(x * 1e3 for x in lat[side])
        res[side]["p50"].append(percentile(ms, 50))
        res[side]["p99"].append(percentile(ms, 99))
        res[side]["rows_s"].append(len(ms) * SAMPLE / (sum(ms) / 1e3))
    log("  Python: " + "; ".join(
        f"{s}: put {res[s]['put'][-1]:.3f} get {res[s]['get'][-1]:.3f} GB/s, p50 "
        f"{res[s]['p50'][-1]:.3f} ms" for s in order))


def percentile(sorted_vals, p):
    # As tests/bench Samples::Percentile: nearest rank (the smallest value
    # with at least p% of the samples <= it).
    if not sorted_vals:
        return float("nan")
    rank = math.ceil(p / 100 * len(sorted_vals))
    return sorted_vals[min(max(rank, 1) - 1, len(sorted_vals) - 1)]


# ---- where the Python time goes -------------------------------------------------

def splits(sides, iters):
    """perf_counter splits of tdstore.TensorDictStore.__getitem__(idx) (its
    _index_read steps, reproduced) and of the native path."""
    from tdstore._index import convert_index
    from tdstore._store import _nest, _to_tensordict

    td = sides.rep_tds
    steps = {"convert_index": [], "native read (network + C++)": [], "_nest (from_dlpack)": [],
             "_to_tensordict": [], "whole td[idx]": [], "native read only": [],
             "frombuffer x4": []}
    for idx in sides.samples[:iters]:
        t0 = time.perf_counter()
        conv = convert_index(idx, td._batch_size)
        t1 = time.perf_counter()
        batch, leaves = td._dict.read(td._read_paths, conv.terms, dlpack=True)
        t2 = time.perf_counter()
        nested = _nest(leaves, len(td._prefix))
        t3 = time.perf_counter()
        out = _to_tensordict(nested, batch, td._device)
        t4 = time.perf_counter()
        if conv.post is not None:
            out = out[conv.post]
        steps["convert_index"].append(t1 - t0)
        steps["native read (network + C++)"].append(t2 - t1)
        steps["_nest (from_dlpack)"].append(t3 - t2)
        steps["_to_tensordict"].append(t4 - t3)
        t0 = time.perf_counter()
        td[idx]
        steps["whole td[idx]"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _, leaves = sides.rep_native.read([], [("positions", idx.data_ptr(), SAMPLE, (SAMPLE,))])
        t1 = time.perf_counter()
        {p[-1]: torch.frombuffer(b, dtype=DT_OF[dt]).view(shape) for p, dt, shape, b in leaves}
        t2 = time.perf_counter()
        steps["native read only"].append(t1 - t0)
        steps["frombuffer x4"].append(t2 - t1)
    return {k: statistics.median(v) * 1e6 for k, v in steps.items()}


def profile_calls(fn, n, top=14, sort="tottime") -> str:
    pr = cProfile.Profile()
    pr.enable()
    for i in range(n):
        fn(i)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats(sort).print_stats(top)
    return s.getvalue()


# ---- main -----------------------------------------------------------------------

def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, < 1 minute")
    ap.add_argument("--repeats", type=int, default=None,
                    help="rounds (C++ run + Python round each); default 3, quick 1")
    ap.add_argument("--json", help="also write the figures and every measurement here")
    ap.add_argument("--unix", action="store_true",
                    help="both clients talk to tdstored over its unix socket")
    ap.add_argument("--profile", action="store_true",
                    help="also cProfile td[idx] and the bulk calls (printed to stderr)")
    ap.add_argument("--no-cpp", action="store_true", help="skip the C++ client")
    ap.add_argument("--tdstored", default=os.path.join(REPO, "build/server/tdstored"))
    ap.add_argument("--cpp-bench", default=os.path.join(REPO, "build/tests/bench/tdstore-bench"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    sizes = ({"bulk_bytes": 16 * MiB, "rows": 100_000, "sample_iters": 100, "bulk_reps": 2}
             if args.quick else
             {"bulk_bytes": 256 * MiB, "rows": 1_000_000, "sample_iters": 1000, "bulk_reps": 3})
    torch.set_num_threads(1)  # as tdstore-bench: the cores belong to what is measured
    load_start = loadavg()
    log(f"load average at start: {load_start}")
    started = time.time()

    env = Env(args)
    sides = None
    try:
        env.start()
        log("filling (bulk leaf and replay buffer, 3 sides) ...")
        sides = Sides(env, sizes)
        res = {s: {"put": [], "get": [], "p50": [], "p99": [], "rows_s": [],
                   "put_meter": Meter(env), "get_meter": Meter(env), "sample_meter": Meter(env),
                   "put_n": 0, "get_n": 0, "sample_n": 0}
               for s in SIDES}
        cpp_runs = []
        loads = []
        for rnd in range(repeats):
            log(f"round {rnd + 1}/{repeats} (load {loadavg()})")
            loads.append(os.getloadavg()[0])
            first_cpp = rnd % 2 == 0
            if first_cpp and not args.no_cpp:
                run_cpp(env, sizes, cpp_runs)
            gc.collect()
            python_round(env, sides, rnd, res)
            if not first_cpp and not args.no_cpp:
                run_cpp(env, sizes, cpp_runs)
        extra = {}
        if not args.quick or args.profile:
            extra["splits_us"] = splits(sides, min(300, sizes["sample_iters"]))
            log("td[idx] splits (median us): " +
                ", ".join(f"{k} {v:.0f}" for k, v in extra["splits_us"].items()))
        if args.profile:
            n = min(300, sizes["sample_iters"])
            extra["profile_sample_tds"] = profile_calls(
                lambda i: sides.sample("tds", sides.samples[i]), n)
            extra["profile_sample_seed"] = profile_calls(
                lambda i: sides.sample("seed", sides.samples[i]), n)
            extra["profile_get_tds"] = profile_calls(lambda i: sides.get("tds"), 2)
            extra["profile_put_tds"] = profile_calls(lambda i: sides.put("tds"), 2)
            extra["profile_get_seed"] = profile_calls(lambda i: sides.get("seed"), 2)
            extra["profile_put_seed"] = profile_calls(lambda i: sides.put("seed"), 2)
            for k in [k for k in extra if k.startswith("profile_")]:
                log(f"---- {k} ----\n{extra[k]}")
    finally:
        if sides is not None:
            sides.close()
        env.stop()
    load_end = loadavg()

    # ---- the table ----
    cpp = {k: med([r[k] for r in cpp_runs]) for k in
           ("put", "get", "p50", "p99", "raw_put", "raw_get", "raw_p50", "raw_p99")}
    fig = {s: {k: med(res[s][k]) for k in ("put", "get", "p50", "p99", "rows_s")} for s in SIDES}
    label = f"{sizes['bulk_bytes'] >> 20} MiB"
    rows = []
    for case, key, unit, higher in ((f"bulk put {label}", "put", "GB/s", True),
                                    (f"bulk get {label}", "get", "GB/s", True),
                                    ("sample 256 x 4 leaves p50", "p50", "ms", False),
                                    ("sample 256 x 4 leaves p99", "p99", "ms", False)):
        c, n, t, s = cpp[key], fig["native"][key], fig["tds"][key], fig["seed"][key]
        if higher:
            py_cpp = f"{n / c:.2f} / {t / c:.2f}"
            td_seed = f"{t / s:.2f}"
        else:
            py_cpp = f"{(n - c) * 1e3:+.0f} / {(t - c) * 1e3:+.0f} us"
            td_seed = f"{s / t:.2f}x faster"
        rows.append((case, unit, c, cpp["raw_" + key], n, t, s, py_cpp, td_seed))

    def fmt(v):
        return "n/a" if v != v else (f"{v:.3f}" if v < 100 else f"{v:.0f}")

    transport = "unix socket" if args.unix else "TCP"
    head = ("| case | unit | C++ client | raw hiredis | Python (native) | Python (TensorDictStore) "
            "| seed | Python/C++ (native / TDS) | tdstore (TDS) vs seed |")
    lines = [head, "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append("| " + " | ".join([r[0], r[1]] + [fmt(v) for v in r[2:7]] + [r[7], r[8]]) +
                     " |")
    targets = {
        "bulk put >= 0.9x C++": fig["tds"]["put"] >= 0.9 * cpp["put"],
        "bulk get >= 0.9x C++": fig["tds"]["get"] >= 0.9 * cpp["get"],
        "sample p50 <= C++ p50 + 50 us": fig["tds"]["p50"] <= cpp["p50"] + 0.050,
    }
    # Paired per round (C++ run r against Python round r): less drift.
    paired = {}
    if cpp_runs:
        n = min(len(cpp_runs), repeats)
        per = sizes["bulk_reps"]
        for s in ("native", "tds"):
            paired[s] = {
                "put_ratio": med([med(res[s]["put"][r * per:(r + 1) * per]) / cpp_runs[r]["put"]
                                  for r in range(n)]),
                "get_ratio": med([med(res[s]["get"][r * per:(r + 1) * per]) / cpp_runs[r]["get"]
                                  for r in range(n)]),
                "p50_diff_us": med([(res[s]["p50"][r] - cpp_runs[r]["p50"]) * 1e3
                                    for r in range(n)]),
            }
    client_cpu = {
        "C++ client": {"sample_us": med([r["cpu_us_sample"] for r in cpp_runs]),
                       "put_s": med([r["cpu_s_put"] for r in cpp_runs]),
                       "get_s": med([r["cpu_s_get"] for r in cpp_runs])} if cpp_runs else {},
    }
    for s in SIDES:
        client_cpu[SIDE_TITLES[s]] = {
            "sample_us": 1e6 * res[s]["sample_meter"].client / max(1, res[s]["sample_n"]),
            "put_s": res[s]["put_meter"].client / max(1, res[s]["put_n"]),
            "get_s": res[s]["get_meter"].client / max(1, res[s]["get_n"])}
    if paired:
        targets.update({
            "paired: bulk put >= 0.9x C++": paired["tds"]["put_ratio"] >= 0.9,
            "paired: bulk get >= 0.9x C++": paired["tds"]["get_ratio"] >= 0.9,
            "paired: sample p50 <= C++ p50 + 50 us": paired["tds"]["p50_diff_us"] <= 50,
        })
    cpu = {s: {"put": res[s]["put_meter"].cpu(), "get": res[s]["get_meter"].cpu(),
               "sample": res[s]["sample_meter"].cpu()} for s in SIDES}
    print(f"\ntdstore through Python vs the C++ client vs the seed ({transport}, standalone Redis, "
          f"{repeats} rounds, {time.time() - started:.0f} s)")
    print(f"load average: start {load_start}, end {load_end}; per round (1 min): "
          + ", ".join(f"{x:.2f}" for x in loads))
    print("\n".join(lines))
    print("\ntargets (Python = tdstore.TensorDictStore): " + "; ".join(
        f"{k}: {'met' if v else 'NOT met'}" for k, v in targets.items()))
    print("CPU% over the timed Python phases (client = this process, incl. the seed's event-loop "
          "thread):")
    for s in SIDES:
        print(f"  {SIDE_TITLES[s]}: " + "; ".join(
            f"{ph} " + " ".join(f"{k} {v}" for k, v in cpu[s][ph].items()) for ph in cpu[s]))
    if paired:
        print("paired by round (median over rounds of Python round r vs C++ run r): " + "; ".join(
            f"{SIDE_TITLES[s]}: put {v['put_ratio']:.2f}x, get {v['get_ratio']:.2f}x, p50 "
            f"{v['p50_diff_us']:+.0f} us" for s, v in paired.items()))
    print("client CPU (this process / tdstore-bench) per call: " + "; ".join(
        f"{k}: sample {v['sample_us']:.0f} us, put {v['put_s'] * 1e3:.0f} ms, get "
        f"{v['get_s'] * 1e3:.0f} ms" for k, v in client_cpu.items() if v))
    if "splits_us" in extra:
        print("td[idx] splits (median us): " +
              ", ".join(f"{k} {v:.0f}" for k, v in extra["splits_us"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({
                "command": " ".join([sys.executable] + sys.argv), "date": time.strftime("%F %T"),
                "transport": transport, "repeats": repeats, "sizes": sizes,
                "load_start": load_start, "load_end": load_end, "load_per_round": loads,
                "cpp_runs": cpp_runs, "cpp": cpp, "python": fig,
                "python_runs": {s: {k: res[s][k] for k in ("put", "get", "p50", "p99", "rows_s")}
                                for s in SIDES},
                "cpu_percent": cpu, "targets": targets, "paired": paired,
                "client_cpu_per_call": client_cpu, "table": lines, **extra,
            }, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
