#!/usr/bin/env python3
"""The same-host data path, paired: one tdstored, three Python clients.

    build/venv/bin/python tests/bench/shm_bench.py [--rounds 3] [--reps 40] [--markdown F]

Sides, each a ``tdstore.Client`` of its own on one tdstored over one
redis-server started here:
  tcp     127.0.0.1:PORT (the socket; what a remote client gets)
  unix    the unix socket with ``shared_memory_bytes=0`` (the socket)
  shm     the unix socket with the default region (docs/protocol.md,
          *Same-host data path*)

The cases are the seed's (tests/bench/seed_bench.py: N = 10,000 rows, 5
leaves [N, 64] float32) that move more than one small message, plus a
31 MiB leaf [N, 820] set and got. Each round runs every case on the three sides in blocks
(the order rotates by round), after 2 untimed calls per side; a round's
figure is the median of its calls, and the table shows the median over
rounds with the rounds in brackets. Ratios are unix / shm and tcp / shm
time (> 1: shared memory is faster), per round, then the median.
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_bench as pb  # noqa: E402  (Env: redis-server + tdstored)

import tdstore  # noqa: E402
from tdstore import TensorDictStore  # noqa: E402
from tensordict import TensorDict  # noqa: E402

N = 10_000


def cases(gen):
    """name -> a callable of (td, big): the seed's dict and the 31 MiB one."""
    leaf = torch.randn(N, 64, generator=gen)
    rows = TensorDict({f"key_{i}": torch.randn(256, 64, generator=gen) for i in range(5)}, [256])
    step = TensorDict({f"key_{i}": torch.randn(len(range(0, N, 3)), 64, generator=gen)
                       for i in range(5)}, [len(range(0, N, 3))])
    fancy = torch.randint(0, N, (256,), generator=gen)
    big = torch.randn(N, 820, generator=gen)  # 31 MiB
    return {
        "get single key (2.5 MiB)": lambda td, b: td["key_0"],
        "set single key (2.5 MiB)": lambda td, b: td.__setitem__("key_1", leaf),
        "to_tensordict() (12.5 MiB)": lambda td, b: td.to_tensordict(),
        "td[100:356].to_td() (320 KiB)": lambda td, b: td[100:356].to_tensordict(),
        "td[::3].to_td() (4.2 MiB)": lambda td, b: td[::3].to_tensordict(),
        "td[fancy].to_td() (320 KiB)": lambda td, b: td[fancy].to_tensordict(),
        "td[100:356] = v (320 KiB)": lambda td, b: td.__setitem__(slice(100, 356), rows),
        "td[::3] = v (4.2 MiB)": lambda td, b: td.__setitem__(slice(0, N, 3), step),
        "set 31 MiB leaf": lambda td, b: b.__setitem__("big", big),
        "get 31 MiB leaf": lambda td, b: b["big"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--markdown")
    ap.add_argument("--tdstored", default=os.path.join(pb.REPO, "build/server/tdstored"))
    ap.add_argument("--redis-server", default=pb.shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    args.unix = True
    env = pb.Env(args)
    env.start()
    try:
        clients = {
            "tcp": tdstore.Client(env.tcp_addr),
            "unix": tdstore.Client(env.unix_addr, shared_memory_bytes=0),
            "shm": tdstore.Client(env.unix_addr),
        }
        assert clients["shm"].shares_memory() and not clients["unix"].shares_memory()
        gen = torch.Generator().manual_seed(0)
        source = TensorDict({f"key_{i}": torch.randn(N, 64, generator=gen) for i in range(5)}, [N])
        first = TensorDictStore.from_dict(source, client=clients["tcp"])
        big = TensorDictStore(batch_size=[N], client=clients["tcp"])
        big["big"] = torch.zeros(N, 820)
        tds = {side: (TensorDictStore.from_store(first.name, client=c),
                      TensorDictStore.from_store(big.name, client=c))
               for side, c in clients.items()}
        todo = cases(gen)
        sides = list(clients)
        per_round = {name: {s: [] for s in sides} for name in todo}
        for rnd in range(args.rounds):
            order = sides[rnd % 3:] + sides[:rnd % 3]
            for name, fn in todo.items():
                for side in order:
                    td, b = tds[side]
                    fn(td, b)
                    fn(td, b)
                    times = []
                    for _ in range(args.reps):
                        t = time.perf_counter()
                        fn(td, b)
                        times.append(time.perf_counter() - t)
                    per_round[name][side].append(statistics.median(times) * 1e3)
            pb.log(f"round {rnd + 1}/{args.rounds} done, load {pb.loadavg()}")
        lines = ["| case | tcp ms | unix ms | shm ms | unix / shm | tcp / shm |",
                 "|---|--:|--:|--:|--:|--:|"]
        for name, by in per_round.items():
            med = {s: statistics.median(v) for s, v in by.items()}
            r_unix = [u / s for u, s in zip(by["unix"], by["shm"])]
            r_tcp = [t / s for t, s in zip(by["tcp"], by["shm"])]
            lines.append(f"| {name} | {med['tcp']:.3f} | {med['unix']:.3f} | {med['shm']:.3f} | "
                         f"**{statistics.median(r_unix):.2f}** ({', '.join(f'{x:.2f}' for x in r_unix)}) | "
                         f"{statistics.median(r_tcp):.2f} |")
        table = "\n".join(lines)
        print(table)
        if args.markdown:
            with open(args.markdown, "a") as out:
                out.write(table + "\n")
        first.drop()
        big.drop()
    finally:
        env.stop()


if __name__ == "__main__":
    main()
