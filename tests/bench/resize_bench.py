"""Times ``resize_`` against writing the same bytes, on one tdstored.

    build/venv/bin/python tests/bench/resize_bench.py --addr 127.0.0.1:50051 [--rows 1000000]

A replay buffer's layout (obs [84] f32, action [6] f32, reward f32, done
bool): ``--rows`` rows, then grow to twice that, shrink back, grow again,
shrink to 10 rows and grow back, each timed; then, for scale, one whole put
of the obs leaf. A grow is Redis allocating and zero-filling the new rows'
parts (a SETRANGE of each part's last byte); a shrink cuts one part per
leaf and deletes the blocks past the end.
"""

import argparse
import time

import torch

from tdstore import TensorDictStore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", default=None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    n = args.rows
    schema = {"obs": ((84,), torch.float32), "action": ((6,), torch.float32),
              "reward": ((), torch.float32), "done": ((), torch.bool)}
    store = TensorDictStore.from_schema(schema, batch_size=[n], addr=args.addr)
    try:
        row_bytes = 84 * 4 + 6 * 4 + 4 + 1
        print(f"{n} rows of {row_bytes} bytes ({n * row_bytes / 2**20:.0f} MiB)")
        for target in (2 * n, n, 2 * n, 10, n):
            start = time.perf_counter()
            store.resize_(target)
            ms = (time.perf_counter() - start) * 1e3
            print(f"resize_({target:>9}): {ms:8.1f} ms")
        obs = torch.rand(n, 84)
        start = time.perf_counter()
        store["obs"] = obs
        ms = (time.perf_counter() - start) * 1e3
        print(f"for scale, store['obs'] = [{n}, 84] f32 ({n * 336 / 2**20:.0f} MiB): {ms:.1f} ms")
    finally:
        store.drop()


if __name__ == "__main__":
    main()
