"""torchrl replay buffers on three storages, in one run on one machine:
LazyTensorStorage (in memory), torchrl's StoreStorage over redis-py (the
seed) and tdstore's TdStoreStorage, over TCP, over tdstored's unix socket
and (with --cluster) on a Redis Cluster.

    build/venv/bin/python tests/bench/replay_bench.py                   # PR #3516's setup
    build/venv/bin/python tests/bench/replay_bench.py --scenario large  # 1,000,000 rows
    build/venv/bin/python tests/bench/replay_bench.py --scenario torchrl  # torchrl's own
    ... --cluster --iters 200 --markdown out.md
    ... --redis-unix   # tdstored and the seed reach Redis over its unix socket

The script starts its own redis-server and tdstored (TCP and a unix socket,
python_bench.Env) and, with --cluster, a 3-master (+3 replica) loopback
Redis Cluster with a second tdstored on it (seed_bench.ClusterEnv). The seed
runs on the standalone redis-server, where tdstored's dicts live too.

Scenarios (issue #16 item 4):
  small  torchrl's StoreStorage PR (#3516): a buffer of 10,000 rows, obs
         [64] float32 (with action [6], reward, done as a collector writes
         them), 5,000 rows filled in extends of 500, batch 256;
  large  a buffer of 1,000,000 rows of obs [84], action [6], reward, done,
         filled to the brim in extends of 500 (the seed's fill takes most
         of the run), batch 256;
  torchrl  torchrl's own benchmark of its store storage, as it is (issue
         #33): a buffer of 10,000 rows of obs [64], action [4], reward [1],
         5,000 filled in extends of 500, batch 256, RandomSampler and
         RoundRobinWriter; each storage also with prefetch=4, and
         TdStoreStorage also with TdStoreWriter.

"fill" is the time to create the buffer and extend it, "fill, all
applied" the time until every row is in tdstore (a TdStoreStorage writing
behind, its default, returns from an extend before its rows are applied:
docs/python.md, *Writes behind*), "sample" one ``rb.sample()``. Every
round of fills and of samples visits each storage in turn, in a new
order each round, so all see the same machine noise; the seed is timed
apart, after the others (its calls leave work behind them that the next
storage in the turns would pay for). Then each storage is sampled back
to back ("sample, back to back"), as torchrl's own benchmark times each
storage in a test of its own: there the in-memory storage keeps its
caches warm between samples (0.13 against 0.32 ms in turns, 2026-12-06),
so that ratio is the stricter one. Figures are medians, ratios are
against LazyTensorStorage. A TCP client on loopback lends tdstored shared
memory as a unix-socket one does (docs/protocol.md, *Same-host data
path*); the rows with ``shared_memory_bytes=0`` keep the bytes on the
TCP socket, as a client on another machine moves them. Then "prefetch": the TCP TdStoreStorage with torchrl's
own ``prefetch=3`` (threads keeping samples in flight) and a training step
of ``--compute-ms`` (a sleep) after each sample: what the trainer waits per
sample, as p50, p99 and the worst of ``--iters``.

TdStoreStorage keeps its rows in a record dict (layout "record", its
default: one range per sampled row); "layout leaves" is the same storage
with each leaf's rows in blocks of their own, as before record dicts.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid

import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_bench as pb  # noqa: E402  (servers)
import seed_bench  # noqa: E402  (the cluster)

from tdstore.torchrl import TdStoreStorage, TdStoreWriter  # noqa: E402

SCENARIOS = {
    "small": {"size": 10_000, "obs": 64, "fill": 5_000, "action": 6, "reward": (), "done": True},
    "large": {"size": 1_000_000, "obs": 84, "fill": 1_000_000, "action": 6, "reward": (),
              "done": True},
    "torchrl": {"size": 10_000, "obs": 64, "fill": 5_000, "action": 4, "reward": (1,),
                "done": False},
}
BATCH = 256


def rows(n: int, sc: dict) -> TensorDict:
    data = {"obs": torch.rand(n, sc["obs"]), "action": torch.rand(n, sc["action"]),
            "reward": torch.rand(n, *sc["reward"])}
    if sc["done"]:
        data["done"] = torch.zeros(n, dtype=torch.bool)
    return TensorDict(data, [n])


def storages(size: int, env, cluster_env, scenario: str) -> dict:
    """name -> a function making an empty ReplayBuffer of that storage."""
    from torchrl.data.replay_buffers import RandomSampler, RoundRobinWriter, StoreStorage

    def tdstore(addr, layout="record", writer=TdStoreWriter, write_behind=True, options=None,
                **kw):
        return lambda: ReplayBuffer(storage=TdStoreStorage(size, addr=addr, layout=layout,
                                                           write_behind=write_behind,
                                                           **(options or {})),
                                    writer=writer(), batch_size=BATCH, **kw)

    # With --redis-unix the seed reaches Redis over its socket, as tdstored
    # then does (StoreStorage passes its keywords on to redis-py).
    where = ({"unix_socket_path": env.redis_socket} if env.redis_socket
             else {"host": "127.0.0.1", "port": env.redis_port})
    seed = lambda: ReplayBuffer(  # noqa: E731
        storage=StoreStorage(size, prefix=f"bench-rb-{uuid.uuid4().hex}", **where),
        batch_size=BATCH)
    if scenario == "torchrl":
        # torchrl's setup, named in full: its sampler and writer on every storage.
        def lazy(**kw):
            return lambda: ReplayBuffer(storage=LazyTensorStorage(size), sampler=RandomSampler(),
                                        writer=RoundRobinWriter(), batch_size=BATCH, **kw)
        return {
            "LazyTensorStorage": lazy(),
            "StoreStorage (seed)": seed,
            "TdStoreStorage TCP, RoundRobinWriter": tdstore(env.tcp_addr, writer=RoundRobinWriter,
                                                            sampler=RandomSampler()),
            # Over loopback TCP the client lends shared memory as over the
            # unix socket; this row keeps every byte on the TCP socket, as a
            # client on another machine moves them.
            "TdStoreStorage TCP, RoundRobinWriter, shared_memory_bytes=0": tdstore(
                env.tcp_addr, writer=RoundRobinWriter, sampler=RandomSampler(),
                options={"shared_memory_bytes": 0}),
            "TdStoreStorage TCP, TdStoreWriter": tdstore(env.tcp_addr, sampler=RandomSampler()),
            "TdStoreStorage unix, RoundRobinWriter": tdstore(env.unix_addr,
                                                             writer=RoundRobinWriter,
                                                             sampler=RandomSampler()),
            "TdStoreStorage unix, RoundRobinWriter, write_behind=False": tdstore(
                env.unix_addr, writer=RoundRobinWriter, sampler=RandomSampler(),
                write_behind=False),
            "LazyTensorStorage, prefetch=4": lazy(prefetch=4),
            "TdStoreStorage TCP, RoundRobinWriter, prefetch=4": tdstore(
                env.tcp_addr, writer=RoundRobinWriter, sampler=RandomSampler(), prefetch=4),
        }
    out = {
        "LazyTensorStorage": lambda: ReplayBuffer(storage=LazyTensorStorage(size),
                                                  batch_size=BATCH),
        "StoreStorage (seed)": seed,
        "TdStoreStorage TCP": tdstore(env.tcp_addr),
        "TdStoreStorage unix": tdstore(env.unix_addr),
        "TdStoreStorage TCP, layout leaves": tdstore(env.tcp_addr, layout="leaves"),
    }
    if cluster_env is not None:
        out["TdStoreStorage cluster"] = tdstore(cluster_env.tcp_addr)
    out["TdStoreStorage TCP, prefetch 3"] = tdstore(env.tcp_addr, prefetch=3)
    return out


def drop(rb) -> None:
    storage = rb.storage
    if isinstance(storage, TdStoreStorage):
        if storage.store is not None:
            storage.store.drop()
    elif hasattr(storage, "_storage") and hasattr(storage._storage, "clear_redis"):
        storage._storage.clear_redis()


def fill(make, data, chunk: int):
    """The buffer filled, the time its extends took, and the time until its
    rows were all applied (for a TdStoreStorage writing behind, until the
    writes still queued when the last extend returned were sent)."""
    rb = make()
    start = time.perf_counter()
    for s in range(0, len(data), chunk):
        rb.extend(data[s:s + chunk])
    extended = time.perf_counter()
    if isinstance(rb.storage, TdStoreStorage):
        rb.storage._settle()
    return rb, extended - start, time.perf_counter() - start


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="small")
    parser.add_argument("--chunk", type=int, default=500, help="rows per extend")
    parser.add_argument("--iters", type=int, default=200, help="samples per storage")
    parser.add_argument("--fills", type=int, default=None,
                        help="fills per storage (median); default 5, large 1")
    parser.add_argument("--compute-ms", type=float, default=1.0,
                        help="the training step between prefetched samples")
    parser.add_argument("--cluster", action="store_true",
                        help="also TdStoreStorage on a 3-master loopback Redis Cluster")
    parser.add_argument("--redis-unix", action="store_true",
                        help="tdstored and the seed reach the standalone Redis over its unix "
                             "socket instead of loopback TCP (docs/operations.md)")
    parser.add_argument("--markdown", help="append the table here")
    parser.add_argument("--tdstored", default=os.path.join(pb.REPO, "build/server/tdstored"))
    parser.add_argument("--redis-server",
                        default=pb.shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    sc = SCENARIOS[args.scenario]
    fills = args.fills or (1 if args.scenario == "large" else 5)
    torch.set_num_threads(1)  # the cores belong to what is measured
    args.unix = False
    env = pb.Env(args)
    cluster_env = None
    kept = {}
    try:
        env.start()
        if args.cluster:
            cargs = argparse.Namespace(**vars(args))
            cargs.cluster = True
            cluster_env = seed_bench.ClusterEnv(cargs)
            cluster_env.start()
        makers = storages(sc["size"], env, cluster_env, args.scenario)
        data = rows(sc["fill"], sc)
        fill_s = {name: [] for name in makers}
        applied_s = {name: [] for name in makers}
        # The seed is timed apart, after the others: its calls leave work
        # behind them (its event-loop thread, and the garbage of a sample's
        # Python objects, which the collector takes from whatever runs
        # next), and whichever storage came right after it in the turns
        # paid for it: 0.3-0.5 ms more a sample on the row after it,
        # 2026-12-06. The others take turns in a new order each round, so
        # none always follows the same one.
        order = random.Random(0)
        seed_name = "StoreStorage (seed)"
        rounds = [[n for n in makers if n != seed_name] for _ in range(fills)]
        for names in rounds:
            order.shuffle(names)
        rounds += [[seed_name] for _ in range(fills)]
        for i, names in enumerate(rounds):
            k = i % fills
            for name in names:
                make = makers[name]
                rb, seconds, applied = fill(make, data, args.chunk)
                fill_s[name].append(seconds)
                applied_s[name].append(applied)
                pb.log(f"fill {k + 1}/{fills} {name}: {seconds * 1e3:.1f} ms")
                if k == fills - 1:
                    kept[name] = rb
                else:
                    drop(rb)
        # The trainer-wait measure below takes "prefetch 3"; torchrl's own
        # "prefetch=4" rows are sampled like the others.
        sample_s = {name: [] for name in makers if "prefetch 3" not in name}
        # Storages without prefetch take turns, so all see the same noise.
        # A prefetching buffer is sampled back to back, as torchrl's
        # benchmark does: taking turns would give its threads the other
        # storages' time to refill and measure only the hand-over.
        alone = [name for name in sample_s if "prefetch=" in name or name == seed_name]
        for _ in range(args.iters):
            names = list(sample_s)
            order.shuffle(names)
            for name in names:
                if name in alone:
                    continue
                start = time.perf_counter()
                batch = kept[name].sample()
                sample_s[name].append(time.perf_counter() - start)
                assert batch.batch_size == torch.Size([BATCH])
        for name in alone:
            for _ in range(args.iters):
                start = time.perf_counter()
                batch = kept[name].sample()
                sample_s[name].append(time.perf_counter() - start)
                assert batch.batch_size == torch.Size([BATCH])
        # Back to back, as torchrl's benchmark samples (module docstring).
        back_to_back = {name: sample_s[name] for name in alone}
        for name in sample_s:
            if name in alone:
                continue
            back_to_back[name] = []
            for _ in range(args.iters):
                start = time.perf_counter()
                batch = kept[name].sample()
                back_to_back[name].append(time.perf_counter() - start)
                assert batch.batch_size == torch.Size([BATCH])
        prefetched = kept.get("TdStoreStorage TCP, prefetch 3")
        waits = []
        for _ in range(args.iters if prefetched is not None else 0):
            start = time.perf_counter()
            batch = prefetched.sample()
            waits.append(time.perf_counter() - start)
            assert batch.batch_size == torch.Size([BATCH])
            time.sleep(args.compute_ms / 1e3)  # the trainer's step
    finally:
        for rb in kept.values():
            drop(rb)
        if cluster_env is not None:
            cluster_env.stop()
        env.stop()

    base_fill = statistics.median(fill_s["LazyTensorStorage"])
    base_sample = statistics.median(sample_s["LazyTensorStorage"])
    seed_fill = statistics.median(fill_s["StoreStorage (seed)"])
    seed_sample = statistics.median(sample_s["StoreStorage (seed)"])
    base_b2b = statistics.median(back_to_back["LazyTensorStorage"])
    title = (f"{args.scenario}: buffer {sc['size']:,}, obs [{sc['obs']}] + action "
             f"[{sc['action']}], reward {list(sc['reward'])}{', done' if sc['done'] else ''}; fill {sc['fill']:,} rows in extends of {args.chunk} (median of {fills}); "
             f"sample {BATCH} (median of {args.iters}); Redis over "
             f"{'its unix socket' if args.redis_unix else 'loopback TCP'}; load {pb.loadavg()}")
    lines = [title, "",
             "| storage | fill ms | × in-memory | seed ÷ this | fill, all applied, ms "
             "| × in-memory | sample ms | × in-memory | seed ÷ this "
             "| sample, back to back, ms | × in-memory |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for name in sample_s:
        f, s = statistics.median(fill_s[name]), statistics.median(sample_s[name])
        a = statistics.median(applied_s[name])
        b = statistics.median(back_to_back[name])
        lines.append(f"| {name} | {f * 1e3:.2f} | {f / base_fill:.1f} | {seed_fill / f:.1f} "
                     f"| {a * 1e3:.2f} | {a / base_fill:.1f} "
                     f"| {s * 1e3:.3f} | {s / base_sample:.1f} | {seed_sample / s:.1f} "
                     f"| {b * 1e3:.3f} | {b / base_b2b:.1f} |")
    if waits:
        lines += ["", f"TdStoreStorage TCP with prefetch=3 and a {args.compute_ms:g} ms training "
                  f"step after each sample: the trainer waits p50 "
                  f"{quantile(waits, 0.5) * 1e3:.3f} ms, p99 {quantile(waits, 0.99) * 1e3:.3f} ms, "
                  f"worst {max(waits) * 1e3:.3f} ms (in-memory sample p50: "
                  f"{base_sample * 1e3:.3f} ms)."]
    print("\n".join(lines))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
