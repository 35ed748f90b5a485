"""What one extend of a replay buffer costs, call by call: a ring append of
500 rows (obs [64] f32, action [6] f32, reward f32, done bool: 144 KB)
against the same rows as a plain indexed write and a bare counter call,
through the native module (no Python above it) and through
TensorDictStore.

    build/venv/bin/python tests/bench/ring_append_bench.py --addr 127.0.0.1:50051

Medians of --iters calls each, after 20 untimed ones.
"""

import argparse
import statistics
import time

import torch
from tensordict import TensorDict

from tdstore import TensorDictStore
from tdstore import _store


def median_ms(fn, iters: int) -> float:
    for _ in range(20):
        fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--addr", required=True)
    parser.add_argument("--iters", type=int, default=300)
    args = parser.parse_args()
    store = TensorDictStore(batch_size=[10_000], addr=args.addr)
    rows = TensorDict({"obs": torch.rand(500, 64), "action": torch.rand(500, 6),
                       "reward": torch.rand(500), "done": torch.zeros(500, dtype=torch.bool)},
                      [500])
    try:
        store[0:500] = rows
        leaves, keep = _store._native_leaves(_store._flatten(rows, (), []), None)
        terms = _store.convert_index(slice(1000, 1500), store.batch_size).terms
        figures = {
            "native ring append": lambda: store._dict.append_ring(leaves, "c", 500, "w"),
            "native indexed write td[1000:1500]": lambda: store._dict.write(leaves, terms),
            "native counter add": lambda: store._dict.counter_add("x", 1),
            "TensorDictStore.append_ring": lambda: store.append_ring(rows, cursor="c", count="w"),
            "TensorDictStore td[1000:1500] = rows":
                lambda: store.__setitem__(slice(1000, 1500), rows),
        }
        for name, fn in figures.items():
            print(f"{name:<40} {median_ms(fn, args.iters):7.3f} ms")
        del keep
    finally:
        store.drop()


if __name__ == "__main__":
    main()
