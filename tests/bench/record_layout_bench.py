"""Record dicts against the default layout and the seed, in one run.

    build/venv/bin/python tests/bench/record_layout_bench.py [--rows 1000000] [--rounds 5]

One replay buffer's leaves (obs [84] f32, action [6] f32, reward f32, done
bool) three times on one redis-server the script starts, with its own
tdstored (python_bench.Env): in tensordict's TensorDictStore over redis-py
(the seed), in a tdstore dict of the default layout ("leaves") and in a
record dict ("record"). Rounds visit the three in turn, so all see the same
machine noise; each round samples 256 random rows of every leaf
``--samples`` times (p50), writes one row of every leaf ``--samples`` times
(p50), and reads each leaf whole once. Figures are medians over rounds.
What issue #13 asks of record dicts: sampling 256 rows x 4 leaves of 1M
rows >= 3x faster than the seed, measured on sampling and on whole-leaf
reads.

``--new-key`` (issue #30): after the fill, a fifth key ("extra", f32) is
written into every side by one indexed write of 50,000 rows; the record
dict keeps it beside its record. A fourth side, "record5", is a record dict
whose first write had all five keys, for the cost of the key beside the
record. The time of that first write of the new key is printed too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
from tensordict import TensorDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_bench as pb  # noqa: E402  (servers)

import tdstore  # noqa: E402

LEAVES = {"obs": ((84,), torch.float32), "action": ((6,), torch.float32),
          "reward": ((), torch.float32), "done": ((), torch.bool)}
SIDES = ("seed", "leaves", "record")


def random_rows(n: int, gen: torch.Generator) -> TensorDict:
    out = {}
    for key, (shape, dtype) in LEAVES.items():
        t = torch.rand((n,) + shape, generator=gen)
        out[key] = (t < 0.01) if dtype is torch.bool else t
    return TensorDict(out, [n])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=100, help="samples and row writes per round")
    ap.add_argument("--new-key", action="store_true", help="add a key after the fill")
    ap.add_argument("--tdstored", default=os.path.join(pb.REPO, "build/server/tdstored"))
    ap.add_argument("--redis-server", default=pb.shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    args.unix = False
    args.cluster = False
    torch.set_num_threads(1)  # the cores belong to what is measured
    from tensordict.store import TensorDictStore as SeedStore

    env = pb.Env(args)
    stores = {}
    try:
        env.start()
        n = args.rows
        gen = torch.Generator().manual_seed(13)
        stores["seed"] = SeedStore(host="127.0.0.1", port=env.redis_port, batch_size=[n],
                                   prefix="record-bench-seed")
        stores["leaves"] = tdstore.TensorDictStore(batch_size=[n], addr=env.tcp_addr)
        stores["record"] = tdstore.TensorDictStore(batch_size=[n], addr=env.tcp_addr,
                                                   layout="record")
        sides = SIDES
        if args.new_key:
            LEAVES["extra"] = ((), torch.float32)
            stores["record5"] = tdstore.TensorDictStore(batch_size=[n], addr=env.tcp_addr,
                                                        layout="record")
            sides = SIDES + ("record5",)
        print(f"filling {n:,} rows three times ...", flush=True)
        chunk = 50_000
        for start in range(0, n, chunk):
            part = random_rows(min(chunk, n - start), gen)
            for side in sides[1:]:
                if side in ("leaves", "record") and args.new_key:
                    stores[side][start:start + len(part)] = part.exclude("extra")
                else:
                    stores[side][start:start + len(part)] = part
            if start == 0:
                whole = {k: torch.empty((n,) + s, dtype=d) for k, (s, d) in LEAVES.items()}
            for k in LEAVES:
                whole[k][start:start + len(part)] = part[k]
        for k, v in whole.items():
            stores["seed"][k] = v  # the seed's whole-leaf write: its fast path
        if args.new_key:  # the key the first writes did not have, as one more write
            for side in ("leaves", "record"):
                t0 = time.perf_counter()
                stores[side][0:chunk] = TensorDict({"extra": whole["extra"][:chunk]}, [chunk])
                print(f"{side}: the first write of the new key ({chunk:,} rows, the leaf "
                      f"made zero-filled for {n:,}): {1e3 * (time.perf_counter() - t0):.1f} ms")
                for start in range(chunk, n, chunk):
                    stores[side][start:start + chunk] = TensorDict(
                        {"extra": whole["extra"][start:start + chunk]}, [min(chunk, n - start)])
        row = random_rows(1, gen)[0]
        results = {what: {s: [] for s in sides}
                   for what in ["sample"] + ["write_row"] + [f"get {k}" for k in LEAVES]}
        for rnd in range(args.rounds):
            order = sides if rnd % 2 == 0 else sides[::-1]
            samples = [torch.randint(0, n, (256,), generator=gen) for _ in range(args.samples)]
            positions = torch.randint(0, n, (args.samples,), generator=gen).tolist()
            for side in order:
                td = stores[side]
                got = td[samples[0]]
                for k in LEAVES:  # every side returns the rows stored
                    assert torch.equal(got[k], whole[k][samples[0]]), (side, k)
                lat = []
                for idx in samples:
                    t0 = time.perf_counter()
                    td[idx]
                    lat.append(time.perf_counter() - t0)
                results["sample"][side].append(1e3 * statistics.median(lat))
                lat = []
                for i in positions:
                    t0 = time.perf_counter()
                    td[i] = row
                    lat.append(time.perf_counter() - t0)
                results["write_row"][side].append(1e3 * statistics.median(lat))
                for k in LEAVES:
                    t0 = time.perf_counter()
                    td[k]
                    results[f"get {k}"][side].append(1e3 * (time.perf_counter() - t0))
            print(f"round {rnd + 1}/{args.rounds}: sample " + ", ".join(
                f"{s} {results['sample'][s][-1]:.2f} ms" for s in sides), flush=True)
        print()
        print(f"{n:,} rows: obs [84] f32, action [6] f32, reward f32, done bool"
              f"{', extra f32 (added after the fill)' if args.new_key else ''}; "
              f"median of {args.rounds} rounds (load {os.getloadavg()[0]:.2f})")
        print()
        extra = " record5 ms | record vs record5 |" if args.new_key else ""
        print("| case | seed ms | leaves ms | record ms | record vs leaves | record vs seed |"
              + extra)
        print("|---|--:|--:|--:|--:|--:|" + ("--:|--:|" if args.new_key else ""))
        labels = {"sample": f"sample 256 rows x {len(LEAVES)} leaves, p50",
                  "write_row": f"write 1 row x {len(LEAVES)} leaves, p50"}
        for what, per in results.items():
            m = {s: statistics.median(per[s]) for s in sides}
            print(f"| {labels.get(what, 'whole leaf ' + what[4:])} | {m['seed']:.3f} | "
                  f"{m['leaves']:.3f} | {m['record']:.3f} | {m['leaves'] / m['record']:.2f}x | "
                  f"{m['seed'] / m['record']:.2f}x |" + (
                      f" {m['record5']:.3f} | {m['record5'] / m['record']:.2f}x |"
                      if args.new_key else ""))
    finally:
        for side in ("leaves", "record", "record5"):
            if side in stores:
                stores[side].drop()
        if "seed" in stores:
            stores["seed"].clear_redis() if hasattr(stores["seed"], "clear_redis") else None
        env.stop()


if __name__ == "__main__":
    main()
