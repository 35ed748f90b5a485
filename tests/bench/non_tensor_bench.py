"""Sampling with a per-row string leaf vs without, on one tdstored (and the
seed, when given a Redis).

    build/venv/bin/python tests/bench/non_tensor_bench.py --addr 127.0.0.1:50051 \\
        [--redis 127.0.0.1:6379] [--rows 100000] [--iters 200]

A replay buffer's layout (obs [84] f32, action [6] f32, reward f32, done
bool), once as is and once with ``text``, a NonTensorStack of one string per
row (~24 bytes: 32-byte slots). Each iteration samples the same 256 random
rows from both, alternating, so both see the same machine noise; the figure
is the median of ``--iters``. The target (issue #15): with the string leaf,
at most 1.5x the tensor-only time. With ``--redis``, tensordict's own
TensorDictStore (the seed, over redis-py) does the same; it keeps a
NonTensorStack as one JSON array and reads all of it for every sample.

A third tdstore store adds ``tokens``, a ragged leaf (an int64 tensor of
0..31 elements per row): its samples come back as a LazyStackedTensorDict of
256 rows, and the figure says what that costs.
"""

import argparse
import statistics
import time

import torch
from tensordict import NonTensorStack, TensorDict

from tdstore import TensorDictStore


def local_rows(n: int, with_text: bool) -> TensorDict:
    td = TensorDict({"obs": torch.rand(n, 84), "action": torch.rand(n, 6),
                     "reward": torch.rand(n), "done": torch.zeros(n, dtype=torch.bool)}, [n])
    if with_text:
        td["text"] = NonTensorStack(*[f"episode {i // 1000:05d} step {i % 1000:03d}"
                                      for i in range(n)])
    return td


def time_samples(stores: dict, n: int, iters: int) -> dict:
    g = torch.Generator().manual_seed(0)
    times = {name: [] for name in stores}
    for _ in range(iters):
        idx = torch.randint(0, n, (256,), generator=g)
        for name, store in stores.items():
            start = time.perf_counter()
            batch = store[idx]
            times[name].append(time.perf_counter() - start)
            assert batch.batch_size == torch.Size([256])
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def seed_stores(redis_addr: str, n: int) -> dict:
    from tensordict.store import TensorDictStore as SeedStore
    host, port = redis_addr.rsplit(":", 1)
    out = {}
    for with_text in (False, True):
        seed = SeedStore(host=host, port=int(port), batch_size=[n],
                         prefix=f"bench-nt-{with_text}")
        seed.update(local_rows(n, False))
        if with_text:
            # The seed keeps per-row values as one JSON array, made by a
            # per-element write.
            seed["text"] = "x"
            seed[torch.arange(n)] = TensorDict(
                {"text": NonTensorStack(*local_rows(n, True).get("text").tolist())}, [n])
        out[f"seed{' + text' if with_text else ''}"] = seed
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", default=None)
    parser.add_argument("--redis", default=None, help="host:port of a Redis for the seed")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args()
    n = args.rows
    stores = {
        "tdstore": TensorDictStore.from_tensordict(local_rows(n, False), addr=args.addr),
        "tdstore + text": TensorDictStore.from_tensordict(local_rows(n, True), addr=args.addr),
        "tdstore + ragged": TensorDictStore.from_tensordict(local_rows(n, False), addr=args.addr),
    }
    stores["tdstore + ragged"]["tokens"] = [torch.arange(i % 32) for i in range(n)]
    seeds = {}
    try:
        if args.redis:
            seeds = seed_stores(args.redis, n)
        p50 = time_samples({**stores, **seeds}, n, args.iters)
        print(f"{n} rows, 256 random rows per sample, median of {args.iters}:")
        for name, ms in p50.items():
            print(f"  {name:<16} {ms:8.3f} ms")
        print(f"tdstore with the text leaf / without: {p50['tdstore + text'] / p50['tdstore']:.2f}x"
              " (target <= 1.5x)")
        print(f"tdstore with the ragged leaf / without: "
              f"{p50['tdstore + ragged'] / p50['tdstore']:.2f}x")
        if seeds:
            print(f"seed with the text leaf / without: {p50['seed + text'] / p50['seed']:.2f}x; "
                  f"tdstore + text vs seed + text: {p50['seed + text'] / p50['tdstore + text']:.1f}x"
                  " faster")
    finally:
        for store in stores.values():
            store.drop()
        for seed in seeds.values():
            seed.clear_redis()


if __name__ == "__main__":
    main()
