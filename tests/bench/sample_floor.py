"""What a torchrl sample through tdstore cannot go below, measured beside the
sample itself and the in-memory storage, in one run (issue #33).

    build/venv/bin/python tests/bench/sample_floor.py [--rounds 3] [--calls 2000] [--tcp]

torchrl's benchmark scenario (replay_bench.py --scenario torchrl: a buffer
of 10,000 rows of obs [64], action [4], reward [1], 5,000 filled, batch
256, RandomSampler, RoundRobinWriter). Each figure is the mean time of
``--calls`` calls made back to back, as torchrl's benchmark times a storage;
each round measures every row once, and the table gives each row's median
over the rounds:

  LazyTensorStorage, rb.sample()   the in-memory baseline;
  a bare gRPC round trip           the native client's server_info: a call
                                   tdstored answers without Redis;
  a Redis round trip (PING)        redis-py to the same redis-server;
  native read, 1 row / 256 rows    the sample's one call to tdstored, from
                                   Python, without torchrl and TensorDicts;
  TdStoreStorage, rb.sample()      the sample;
  raw ideal, ranges / fields       raw-sample-floor (C++, plain hiredis, no
                                   tdstored, no Python): the same number of
                                   random rows of the same bytes, read by
                                   merged GETRANGEs in one pipeline from
                                   one string of records, and by one HMGET
                                   from a hash of one field per record.

A sample makes at least one call to tdstored, which makes at least one
round trip to Redis: the sum of those two rows is a floor under any
design with tdstored between the client and Redis, before a row is
moved or a line of Python runs. The raw ideal is a floor under any
client of Redis: the Redis work of the sample alone, with nothing in
between; a gRPC round trip plus the raw ideal is a floor under any design
that puts a gRPC hop in front of that work. "3x LazyTensorStorage" is
printed beside them. The client reaches tdstored over its unix socket
(--tcp: loopback TCP).
"""

from __future__ import annotations

import argparse
import logging
import os
import json
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402
import torch  # noqa: E402
from torchrl.data import LazyTensorStorage, ReplayBuffer  # noqa: E402
from torchrl.data.replay_buffers import RandomSampler, RoundRobinWriter  # noqa: E402

import python_bench as pb  # noqa: E402  (servers)
import replay_bench as rbm  # noqa: E402  (the scenario's rows)
import tdstore._native as native  # noqa: E402
from tdstore._index import convert_index  # noqa: E402
from tdstore.torchrl import TdStoreStorage  # noqa: E402


CHUNK = 500  # rows per extend, as torchrl's benchmark fills


def per_call_ms(fn, calls: int) -> float:
    for _ in range(min(300, calls)):
        fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=2000, help="calls per row and round")
    ap.add_argument("--tcp", action="store_true", help="reach tdstored over loopback TCP")
    ap.add_argument("--tdstored", default=os.path.join(pb.REPO, "build/server/tdstored"))
    ap.add_argument("--redis-server", default="redis-server")
    ap.add_argument("--raw-sample-floor",
                    default=os.path.join(pb.REPO, "build/tests/bench/raw-sample-floor"))
    args = ap.parse_args()
    env_args = argparse.Namespace(tdstored=args.tdstored, redis_server=args.redis_server,
                                  unix=True, cluster=False, quick=False, redis_unix=False)
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # its storages log to stdout
    torch.set_num_threads(1)  # as the other benchmarks: the cores belong to what is measured
    env = pb.Env(env_args)
    env.start()
    try:
        sc = rbm.SCENARIOS["torchrl"]
        data = rbm.rows(sc["fill"], sc)
        addr = env.tcp_addr if args.tcp else env.unix_addr
        lazy = ReplayBuffer(storage=LazyTensorStorage(sc["size"]), sampler=RandomSampler(),
                            writer=RoundRobinWriter(), batch_size=rbm.BATCH)
        storage = TdStoreStorage(sc["size"], addr=addr)
        rb = ReplayBuffer(storage=storage, sampler=RandomSampler(), writer=RoundRobinWriter(),
                          batch_size=rbm.BATCH)
        for s in range(0, sc["fill"], CHUNK):
            part = data[s:s + CHUNK]
            lazy.extend(part)
            rb.extend(part)
        storage._settle()
        store = storage._opened()
        client = native.Client(addr)
        r = redis.Redis(port=env.redis_port)
        # The converted indices point into their tensors: both stay alive.
        one_index = torch.randint(0, sc["fill"], (1,))
        many_index = torch.randint(0, sc["fill"], (rbm.BATCH,))
        one_conv = convert_index(one_index, store.batch_size)
        many_conv = convert_index(many_index, store.batch_size)
        one, many = one_conv.terms, many_conv.terms
        paths = store._read_paths
        row_bytes = sum(v[0].numel() * v.element_size()
                        for v in data.values(include_nested=True, leaves_only=True))
        raw_cmd = [args.raw_sample_floor, "--redis", f"redis://127.0.0.1:{env.redis_port}",
                   "--rows", str(sc["fill"]), "--row-bytes", str(row_bytes),
                   "--batch", str(rbm.BATCH), "--calls", str(args.calls)]

        def raw_ideal() -> dict:
            out = subprocess.run(raw_cmd, check=True, capture_output=True, text=True).stdout
            return json.loads(out)

        rows = {
            "LazyTensorStorage, rb.sample()": lazy.sample,
            "a bare gRPC round trip (server_info)": client.server_info,
            "a Redis round trip (redis-py PING)": r.ping,
            "native read, 1 row": lambda: store._dict.read(paths, one, dlpack=True),
            f"native read, {rbm.BATCH} rows": lambda: store._dict.read(paths, many, dlpack=True),
            "TdStoreStorage, rb.sample()": rb.sample,
        }
        raw_ranges = f"raw ideal, {rbm.BATCH} rows as merged GETRANGEs (C++)"
        raw_fields = f"raw ideal, {rbm.BATCH} rows as one HMGET (C++)"
        got = {name: [] for name in [*rows, raw_ranges, raw_fields]}
        getranges = []
        for i in range(args.rounds):
            for name, fn in rows.items():
                got[name].append(per_call_ms(fn, args.calls))
            raw = raw_ideal()
            got[raw_ranges].append(raw["ranges_ms"])
            got[raw_fields].append(raw["fields_ms"])
            getranges.append(raw["getranges_per_sample"])
            print(f"round {i + 1}: " + ", ".join(f"{n} {v[-1]:.3f}" for n, v in got.items()),
                  file=sys.stderr, flush=True)
        med = {name: statistics.median(v) for name, v in got.items()}
        print(f"| per call, ms ({'TCP' if args.tcp else 'unix socket'}; median of "
              f"{args.rounds} rounds of {args.calls}) | median | rounds |")
        print("|---|--:|---|")
        for name, v in got.items():
            print(f"| {name} | {med[name]:.3f} | {', '.join(f'{x:.3f}' for x in v)} |")
        lazy_ms = med["LazyTensorStorage, rb.sample()"]
        floor = med["a bare gRPC round trip (server_info)"] + med["a Redis round trip (redis-py PING)"]
        print(f"| floor: gRPC + Redis round trips | {floor:.3f} | |")
        grpc_ms = med["a bare gRPC round trip (server_info)"]
        print(f"| floor: gRPC round trip + raw ideal (GETRANGEs) | {grpc_ms + med[raw_ranges]:.3f} | |")
        print(f"| floor: gRPC round trip + raw ideal (HMGET) | {grpc_ms + med[raw_fields]:.3f} | |")
        print(f"| 3x LazyTensorStorage | {3 * lazy_ms:.3f} | |")
        print(f"\nTdStoreStorage ÷ LazyTensorStorage: "
              f"{med['TdStoreStorage, rb.sample()'] / lazy_ms:.1f}x; the floor alone: "
              f"{floor / lazy_ms:.1f}x; the raw ideal alone: "
              f"{med[raw_ranges] / lazy_ms:.1f}x (GETRANGEs, "
              f"{statistics.median(getranges):.0f} a sample), "
              f"{med[raw_fields] / lazy_ms:.1f}x (HMGET); a gRPC round trip and the raw "
              f"ideal: {(grpc_ms + med[raw_ranges]) / lazy_ms:.1f}x and "
              f"{(grpc_ms + med[raw_fields]) / lazy_ms:.1f}x")
        storage._settle()
    finally:
        env.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
