"""torchrl replay buffers on three storages, in one run on one Redis:
LazyTensorStorage (in memory), torchrl's StoreStorage over redis-py (the
seed) and tdstore's TdStoreStorage.

    build/venv/bin/python tests/bench/replay_bench.py --addr 127.0.0.1:50051 \\
        --redis 127.0.0.1:6379 [--size 10000] [--obs 64] [--fill 5000] [--iters 100]

The setup of torchrl's StoreStorage PR (#3516): a buffer of ``--size`` rows,
``obs`` of ``--obs`` float32, batch 256. "fill" extends ``--fill`` rows in
chunks of ``--chunk``; "sample" is ``rb.sample()`` of 256 rows. Each
iteration runs every storage in turn, so all see the same machine noise;
figures are medians, and ratios are against LazyTensorStorage. With
``--compute-ms``, each sample is followed by that long a pause (a training
step), during which a prefetching buffer reads ahead: its sample time is
then what the trainer waits.
"""

import argparse
import statistics
import time
import uuid

import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer

from tdstore.torchrl import TdStoreStorage, TdStoreWriter


def rows(n: int, obs: int) -> TensorDict:
    return TensorDict({"obs": torch.rand(n, obs), "action": torch.rand(n, 6),
                       "reward": torch.rand(n), "done": torch.zeros(n, dtype=torch.bool)}, [n])


def buffers(args) -> dict:
    out = {"LazyTensorStorage": lambda: ReplayBuffer(storage=LazyTensorStorage(args.size),
                                                     batch_size=256)}
    if args.redis:
        from torchrl.data.replay_buffers import StoreStorage
        host, port = args.redis.rsplit(":", 1)

        def seed():
            return ReplayBuffer(storage=StoreStorage(args.size, host=host, port=int(port),
                                                     prefix=f"bench-rb-{uuid.uuid4().hex}"),
                                batch_size=256)
        out["StoreStorage (seed)"] = seed
    out["TdStoreStorage"] = lambda: ReplayBuffer(
        storage=TdStoreStorage(args.size, addr=args.addr), writer=TdStoreWriter(),
        batch_size=256)
    # torchrl's own prefetch (threads keeping samples in flight): what a
    # trainer waits for per sample when it computes between samples.
    out["TdStoreStorage, prefetch 3"] = lambda: ReplayBuffer(
        storage=TdStoreStorage(args.size, addr=args.addr), writer=TdStoreWriter(),
        batch_size=256, prefetch=3)
    return out


def drop(rb) -> None:
    storage = rb.storage
    if isinstance(storage, TdStoreStorage):
        if storage.store is not None:
            storage.store.drop()
    elif hasattr(storage, "_storage") and hasattr(storage._storage, "clear_redis"):
        storage._storage.clear_redis()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", default=None)
    parser.add_argument("--redis", default=None, help="host:port of a Redis for the seed")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--obs", type=int, default=64)
    parser.add_argument("--fill", type=int, default=5_000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--fills", type=int, default=5)
    parser.add_argument("--compute-ms", type=float, default=0.0,
                        help="sleep this long after each sample, as a training step would")
    args = parser.parse_args()
    makers = buffers(args)
    data = rows(args.fill, args.obs)
    fill = {name: [] for name in makers}
    sample = {name: [] for name in makers}
    kept = {}
    try:
        for k in range(args.fills):
            for name, make in makers.items():
                rb = make()
                start = time.perf_counter()
                for s in range(0, args.fill, args.chunk):
                    rb.extend(data[s:s + args.chunk])
                fill[name].append(time.perf_counter() - start)
                if k == args.fills - 1:
                    kept[name] = rb
                else:
                    drop(rb)
        for _ in range(args.iters):
            for name, rb in kept.items():
                start = time.perf_counter()
                batch = rb.sample()
                sample[name].append(time.perf_counter() - start)
                assert batch.batch_size == torch.Size([256])
                if args.compute_ms:
                    time.sleep(args.compute_ms / 1e3)  # the trainer's step
    finally:
        for rb in kept.values():
            drop(rb)
    base_fill = statistics.median(fill["LazyTensorStorage"])
    base_sample = statistics.median(sample["LazyTensorStorage"])
    print(f"buffer {args.size}, obs [{args.obs}], fill {args.fill} rows in chunks of "
          f"{args.chunk} (median of {args.fills}), sample 256 (median of {args.iters}):")
    print(f"  {'storage':<22} {'fill ms':>9} {'x mem':>7} {'sample ms':>10} {'x mem':>7}")
    for name in makers:
        f, s = statistics.median(fill[name]), statistics.median(sample[name])
        print(f"  {name:<22} {f * 1e3:9.2f} {f / base_fill:7.1f} {s * 1e3:10.3f} "
              f"{s / base_sample:7.1f}")


if __name__ == "__main__":
    main()
