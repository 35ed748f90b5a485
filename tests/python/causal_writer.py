"""Process B of test_causal.py: changes a dict's schema, then bumps a counter.

    python causal_writer.py ADDR NAME STEPS

For step i = 1..STEPS on the dict NAME (made by process A with leaf s0/v and
batch size [10]): unlock (if step i-1 locked), add leaf k<i>, delete k<i-1>, rename the
sub-dict s<i-1> to s<i>, resize to 10 + i, lock if i is odd; then bump the
counter "step" to i, and wait until A has checked it: a byte on stdin. (The
acknowledgement goes outside tdstored on purpose: A learns of step i only
through tdstored, and the waiting costs the cores nothing.)
"""

import sys

import torch

from tdstore import TensorDictStore


def main(addr: str, name: str, steps: int) -> None:
    td = TensorDictStore.from_store(name, addr=addr)
    for i in range(1, steps + 1):
        if i > 1 and (i - 1) % 2 == 1:
            td.unlock_()
        td[f"k{i}"] = torch.full((10 + i - 1,), i)
        if i > 1:
            del td[f"k{i - 1}"]
        td.rename_key_(f"s{i - 1}", f"s{i}")
        td.resize_(10 + i)
        if i % 2 == 1:
            td.lock_()
        td.counter_add("step")
        if sys.stdin.buffer.read(1) != b"a":
            sys.exit(f"causal_writer: no acknowledgement of step {i}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
