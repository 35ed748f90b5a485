"""Paired small calls: one Python client against two tdstored binaries on one redis-server.

    python tests/bench/paired_daemons_bench.py OLD_TDSTORED NEW_TDSTORED [ROUNDS]
        [--unix] [--cases "td[::3] read,write td[::3]"]

Needs a redis-server on 127.0.0.1:7777 (each daemon gets its own namespace).
Alternates the two daemons per case and round; prints the medians of the
rounds' medians (300 calls each, or as many as fit in 3 s, after 20 warm-up
calls). The client talks TCP, or with --unix each daemon's unix socket
(and so shared memory). Used for docs/benchmarks.md, *The cost of causal
schema reads* and issue #33's tables.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from tensordict import TensorDict

from tdstore import TensorDictStore
parser = argparse.ArgumentParser()
parser.add_argument("old")
parser.add_argument("new")
parser.add_argument("rounds", type=int, nargs="?", default=3)
parser.add_argument("--unix", action="store_true", help="over each daemon's unix socket")
parser.add_argument("--cases", help="comma-separated case names (default: all)")
args = parser.parse_args()
sockets = tempfile.mkdtemp(prefix="tdstore-paired-")
def start(binary, port):
    p = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--redis", "redis://127.0.0.1:7777", "--namespace", f"b{port}",
                          "--unix-socket", os.path.join(sockets, f"{port}.sock")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5); return p
procs = [start(args.old, 7790), start(args.new, 7791)]
stores = {}
for label, port in (("old", 7790), ("new", 7791)):
    addr = f"unix://{sockets}/{port}.sock" if args.unix else f"127.0.0.1:{port}"
    td = TensorDictStore(batch_size=[10000], addr=addr)
    for k in "abcde": td[k] = torch.rand(10000, 64)
    "a" in td
    # torchrl's store-storage scenario's rows, in a record dict, half filled
    rec = TensorDictStore(batch_size=[10000], addr=addr, layout="record")
    rec[:5000] = {"obs": torch.rand(5000, 64), "action": torch.rand(5000, 4),
                  "reward": torch.rand(5000, 1)}
    td.rec = rec
    stores[label] = td
LEAF = torch.rand(10000, 64)
ROWS_256 = TensorDict({k: torch.rand(256, 64) for k in "abcde"}, [256])
ROWS_STEP3 = TensorDict({k: torch.rand(3334, 64) for k in "abcde"}, [3334])
cases = {
    "counter_get": lambda td: td.counter_get("c"),
    "td[42] read": lambda td: td[42].to_tensordict(),
    "td[42] write": lambda td: td.__setitem__(42, {"a": torch.ones(64)}),
    "td[100:356] read": lambda td: td[100:356].to_tensordict(),
    "td[::3] read": lambda td: td[::3].to_tensordict(),
    "counter_add": lambda td: td.counter_add("c"),
    "sample 256 (record)": lambda td: td.rec[torch.randint(0, 5000, (256,))],
    "get leaf": lambda td: td["a"],
    "set leaf (2.5 MiB)": lambda td: td.__setitem__("a", LEAF),
    "write td[100:356]": lambda td: td.__setitem__(slice(100, 356), ROWS_256),
    "write td[::3]": lambda td: td.__setitem__(slice(None, None, 3), ROWS_STEP3),
    "keys()": lambda td: list(td.keys()),
}
if args.cases:
    cases = {c: cases[c] for c in args.cases.split(",")}
res = {c: {"old": [], "new": []} for c in cases}
for rnd in range(args.rounds):
    for c, f in cases.items():
        for label in ("old", "new"):
            td = stores[label]
            for _ in range(20): f(td)
            ts = []
            spent = time.perf_counter()
            # 300 calls, or as many as fit in 3 s (at least 10)
            while len(ts) < 300 and (len(ts) < 10 or time.perf_counter() - spent < 3):
                a = time.perf_counter(); f(td); ts.append(time.perf_counter() - a)
            res[c][label].append(statistics.median(ts) * 1e3)
print(f"{'case':20} {'before ms':>10} {'after ms':>10} {'after/before':>12}")
for c in cases:
    o, n = statistics.median(res[c]["old"]), statistics.median(res[c]["new"])
    print(f"{c:20} {o:10.3f} {n:10.3f} {n/o:12.2f}")
for p in procs: p.terminate()
