"""Where one call's time goes: wall time per call and the CPU each process
spends on it (this client, tdstored, redis-server, from /proc), with
Redis' own per-command figures (INFO commandstats), over many calls of one
kind on an otherwise idle tdstored and redis-server of its own.

    build/venv/bin/python tests/bench/call_cpu.py --op extend   # torchrl extend of 500 rows
    build/venv/bin/python tests/bench/call_cpu.py --op sample   # a 256-row sample (storage.get)
    build/venv/bin/python tests/bench/call_cpu.py --op sample1  # the same call for 1 row: its floor
    build/venv/bin/python tests/bench/call_cpu.py --op set      # set one [10000, 64] f32 leaf
    build/venv/bin/python tests/bench/call_cpu.py --op counter  # counter_get: a round trip, no data
    build/venv/bin/python tests/bench/call_cpu.py --op contains --calls 200000  # `k in td`:
                                    # the watched schema copy, no round trip (also --op keys)
    ... --tcp (default: the unix socket, so shared memory) --calls 2000
    ... --redis-unix  # tdstored reaches redis-server over a unix socket
    ... --profile    # also: the client's Python functions by own time (cProfile)
    ... --callgrind /tmp/td.cg  # tdstored under valgrind's callgrind: its
                                # instructions per call, counted over the calls
                                # only (repeatable where wall and CPU times
                                # are not); callgrind_annotate --inclusive=yes
                                # /tmp/td.cg.1 says where they go

torchrl's scenario (issue #33): a buffer of 10,000 rows of obs [64],
action [4], reward [1], RoundRobinWriter, 5,000 rows filled first. Sizes,
not ratios: nothing is paired here (replay_bench.py and seed_bench.py
pair tdstore with in-memory torchrl and the seed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch
from tensordict import TensorDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_bench as pb  # noqa: E402  (servers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", choices=("extend", "sample", "sample1", "set", "counter", "keys", "contains"), default="sample")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--tcp", action="store_true", help="the client over TCP, not the unix socket")
    ap.add_argument("--redis-unix", action="store_true",
                    help="tdstored reaches redis-server over a unix socket, not loopback TCP")
    ap.add_argument("--profile", action="store_true",
                    help="then profile the client's calls again under cProfile, by own time")
    ap.add_argument("--callgrind", metavar="FILE",
                    help="run tdstored under callgrind; its counts over the calls go to FILE.1")
    ap.add_argument("--tdstored", default=os.path.join(pb.REPO, "build/server/tdstored"))
    ap.add_argument("--redis-server", default="redis-server")
    args = ap.parse_args()
    args.unix = not args.tcp
    if args.callgrind:
        args.tdstored_launcher = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" +
                                  args.callgrind]
    env = pb.Env(args)
    env.start()
    try:
        op = make_op(args.op, env.addr)
        # An op whose calls may return before they are applied (an extend
        # written behind) says how to wait for them: the timing covers it.
        settle = getattr(op, "settle", lambda: None)
        for _ in range(50):  # warm: connections, the region, the schema cache
            op()
        settle()
        env.r.config_resetstat()
        if args.callgrind:  # counts from here on only
            subprocess.run(["callgrind_control", "-z", str(env.daemon_pid)], check=True,
                           capture_output=True)
        before = (time.perf_counter(), time.process_time(), pb.proc_cpu(env.daemon_pid),
                  pb.proc_cpu(env.redis_pid))
        for _ in range(args.calls):
            op()
        settle()
        after = (time.perf_counter(), time.process_time(), pb.proc_cpu(env.daemon_pid),
                 pb.proc_cpu(env.redis_pid))
        if args.callgrind:
            subprocess.run(["callgrind_control", "-d", str(env.daemon_pid)], check=True,
                           capture_output=True)
            with open(args.callgrind + ".1") as f:
                total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
            print(f"tdstored under callgrind: {total / args.calls:,.0f} instructions per call "
                  f"(user space, every thread; {args.callgrind}.1)")
        per = [(b - a) / args.calls * 1e3 for a, b in zip(before, after)]
        print(f"{args.op} over {'tcp' if args.tcp else 'unix'}, {args.calls} calls: wall "
              f"{per[0]:.3f} ms ({per[0] * 1e3:.2f} us); CPU ms per call: client {per[1]:.3f}, tdstored {per[2]:.3f}, "
              f"redis {per[3]:.3f}")
        stats = env.r.info("commandstats")
        print("redis per call: " + ", ".join(
            f"{k[len('cmdstat_'):]} {v['calls'] / args.calls:.2f}x {v['usec'] / args.calls:.1f} us"
            for k, v in sorted(stats.items()) if "config" not in k))
        if args.profile:  # a second pass: cProfile's own overhead must not count above
            import cProfile
            import pstats

            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.calls):
                op()
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    finally:
        env.stop()


def make_op(kind: str, addr: str):
    if kind in ("counter", "keys", "contains"):
        import tdstore

        td = tdstore.TensorDictStore(batch_size=[4], addr=addr, name="call-cpu")
        for i in range(5):
            td[f"key_{i}"] = torch.zeros(4)  # the dict's schema is watched from here on
        if kind == "keys":
            return lambda: list(td.keys())
        if kind == "contains":
            return lambda: "key_3" in td
        return lambda: td.counter_get("c")
    if kind == "set":
        import tdstore

        td = tdstore.TensorDictStore(batch_size=[10_000], addr=addr, name="call-cpu")
        value = torch.rand(10_000, 64)
        td["key_0"] = value
        return lambda: td.__setitem__("key_0", value)

    from torchrl.data import ReplayBuffer
    from torchrl.data.replay_buffers import RandomSampler, RoundRobinWriter

    from tdstore.torchrl import TdStoreStorage

    data = TensorDict({"obs": torch.rand(5000, 64), "action": torch.rand(5000, 4),
                       "reward": torch.rand(5000, 1)}, [5000])
    rb = ReplayBuffer(storage=TdStoreStorage(10_000, addr=addr), sampler=RandomSampler(),
                      writer=RoundRobinWriter(), batch_size=256)
    for s in range(0, 5000, 500):
        rb.extend(data[s:s + 500])
    if kind in ("sample", "sample1"):
        index = torch.randint(0, 5000, (256 if kind == "sample" else 1,))
        return lambda: rb.storage.get(index)
    chunks = [data[s:s + 500] for s in range(0, 5000, 500)]
    state = {"i": 0}

    def extend():
        rb.extend(chunks[state["i"] % len(chunks)])
        state["i"] += 1
    extend.settle = rb.storage._settle
    return extend


if __name__ == "__main__":
    main()
