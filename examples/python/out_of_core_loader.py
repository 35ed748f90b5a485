"""An epoch over a dataset larger than any DataLoader worker's memory budget.

    build/venv/bin/python examples/python/out_of_core_loader.py --addr 127.0.0.1:50051

The dataset lives in tdstored: ``--rows`` rows of an image-like ``x``
(float32 [1024], 4 KiB a row), a label ``y`` and the row's own ``id``
(256 MiB by default). A DataLoader with 2 worker processes reads it in
shuffled batches through ``tdstore.torch.StoreDataset``: each batch of
positions is one indexed read, so a worker only ever holds the batches it
is preparing, never the dataset. The script checks what a trainer needs:

- every row arrives exactly once per epoch (the ids), with its own values;
- each worker stays within ``--budget-mib`` above what it held once
  started, while the dataset is several times that (its peak resident
  memory, VmHWM, which each worker reports as it exits).

The dataset is written in slices of 8,192 rows, so this script never holds
it whole either.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing.util
import os
import tempfile
import time

import torch
from tensordict import TensorDict
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from tdstore import TensorDictStore
from tdstore.torch import StoreDataset

WIDTH = 1024  # floats of x per row: 4 KiB
WRITE_ROWS = 8192  # rows per write while filling


def _row_values(ids: torch.Tensor) -> TensorDict:
    """Rows whose values follow from their ids, so any row can be checked."""
    x = ids.to(torch.float32)[:, None] + torch.arange(WIDTH, dtype=torch.float32) / WIDTH
    return TensorDict({"x": x, "y": ids % 10, "id": ids}, [len(ids)])


def fill(addr: str, rows: int) -> TensorDictStore:
    store = TensorDictStore(batch_size=[rows], addr=addr)
    for start in range(0, rows, WRITE_ROWS):
        stop = min(rows, start + WRITE_ROWS)
        store[start:stop] = _row_values(torch.arange(start, stop))
    return store


def _memory_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status, in bytes:
    "VmRSS" (resident now) or "VmHWM" (its peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


class _Report:
    """Written by each worker as it exits (multiprocessing runs Finalize
    callbacks then): its resident memory once started, and its peak."""

    def __init__(self, directory: str):
        self.directory = directory

    def __call__(self, worker_id: int) -> None:
        started = _memory_bytes("VmRSS")
        path = os.path.join(self.directory, f"worker-{worker_id}.json")

        def report():
            with open(path, "w") as f:
                json.dump({"started": started, "peak": _memory_bytes("VmHWM")}, f)

        multiprocessing.util.Finalize(None, report, exitpriority=100)


def main(addr: str, rows: int = 65_536, batch: int = 512, budget_mib: int = 64,
         verbose: bool = True) -> dict:
    store = fill(addr, rows)
    try:
        dataset = StoreDataset(store)
        reports = tempfile.mkdtemp(prefix="tdstore-loader-")
        loader = DataLoader(dataset, batch_size=None, num_workers=2,
                            sampler=BatchSampler(RandomSampler(dataset), batch, drop_last=False),
                            collate_fn=StoreDataset.collate_fn,
                            multiprocessing_context="spawn", worker_init_fn=_Report(reports))
        seen = torch.zeros(rows, dtype=torch.int64)
        values_match = True
        started = time.perf_counter()
        for b in loader:
            ids = b["id"]
            seen.index_add_(0, ids, torch.ones_like(ids))
            want = _row_values(ids)
            values_match &= bool(torch.equal(b["x"], want["x"]) and torch.equal(b["y"], want["y"]))
        seconds = time.perf_counter() - started
        workers = []
        for name in sorted(os.listdir(reports)):
            with open(os.path.join(reports, name)) as f:
                workers.append(json.load(f))
        dataset_bytes = rows * (WIDTH * 4 + 8 + 8)
        result = {
            "rows": rows,
            "dataset_mib": dataset_bytes / 2**20,
            "every_row_once": bool((seen == 1).all()),
            "values_match": values_match,
            "workers": len(workers),
            "worker_growth_mib": [(w["peak"] - w["started"]) / 2**20 for w in workers],
            "budget_mib": budget_mib,
            "rows_per_s": rows / seconds,
        }
        if verbose:
            print(f"{rows} rows ({result['dataset_mib']:.0f} MiB) in {seconds:.2f} s "
                  f"({result['rows_per_s']:.0f} rows/s) through 2 workers; every row once: "
                  f"{result['every_row_once']}, values match: {values_match}; each worker grew "
                  + ", ".join(f"{g:.1f}" for g in result["worker_growth_mib"])
                  + f" MiB (budget {budget_mib} MiB)")
        return result
    finally:
        store.drop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--addr", default=os.environ.get("TDSTORE_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--rows", type=int, default=65_536)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--budget-mib", type=int, default=64)
    a = parser.parse_args()
    r = main(a.addr, a.rows, a.batch, a.budget_mib)
    ok = (r["every_row_once"] and r["values_match"] and r["workers"] == 2
          and max(r["worker_growth_mib"]) < a.budget_mib < r["dataset_mib"])
    raise SystemExit(0 if ok else 1)
