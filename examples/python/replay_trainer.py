"""A trainer sampling batches from a replay store that another process fills.

    python examples/python/replay_trainer.py --addr 127.0.0.1:50051

* The trainer creates two stores: ``replay`` (batch [capacity]: obs, action,
  reward, next/obs) and ``progress`` (batch []: how many rows are written).
* A producer process (torch.multiprocessing, spawn) receives both stores —
  they pickle as handles — and writes transitions chunk by chunk, each chunk
  one indexed write ``replay[a:b] = TensorDict(...)``, then bumps
  ``progress["rows"]``.
* Meanwhile the trainer samples ``replay[torch.randint(rows, (batch,))]``
  (one indexed read of only those rows) and fits a tiny model predicting the
  reward from (obs, action). The rewards come from a fixed linear function,
  so the loss falls towards the noise floor.

Both stores are dropped at the end.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.multiprocessing as mp
from tensordict import TensorDict

import tdstore

OBS, ACTIONS = 8, 4


def true_reward(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    w = torch.linspace(-1.0, 1.0, OBS)
    bonus = torch.tensor([0.5, -0.5, 1.0, 0.0])
    return obs @ w + bonus[action]


def producer(replay, progress, chunk: int, delay: float, training) -> None:
    """Fill ``replay`` chunk by chunk (runs in a spawned process). After its
    first chunk it waits until the trainer has taken a step (``training``),
    so every run shows training while filling, however busy the machine."""
    g = torch.Generator().manual_seed(1)
    capacity = replay.batch_size[0]
    for start in range(0, capacity, chunk):
        if start == chunk:
            training.wait(120)
        end = min(start + chunk, capacity)
        n = end - start
        obs = torch.randn(n, OBS, generator=g)
        action = torch.randint(0, ACTIONS, (n,), generator=g)
        reward = true_reward(obs, action) + 0.01 * torch.randn(n, generator=g)
        replay[start:end] = TensorDict(
            {"obs": obs, "action": action, "reward": reward,
             "next": {"obs": obs + 0.1}},
            batch_size=[n],
        )
        progress["rows"] = torch.tensor(end)  # after the rows: readers never see unwritten rows
        time.sleep(delay)


class RewardModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.obs = torch.nn.Linear(OBS, 1)
        self.action = torch.nn.Embedding(ACTIONS, 1)

    def forward(self, obs, action):
        return (self.obs(obs) + self.action(action)).squeeze(-1)


def main(addr: str | None = None, capacity: int = 4096, chunk: int = 256, steps: int = 300,
         batch: int = 64, delay: float = 0.01, verbose: bool = True) -> dict:
    client = tdstore.Client(addr)
    replay = tdstore.TensorDictStore.from_schema(
        {"obs": ([OBS], torch.float32), "action": ([], torch.int64),
         "reward": ([], torch.float32), ("next", "obs"): ([OBS], torch.float32)},
        batch_size=[capacity], client=client)
    progress = tdstore.TensorDictStore(batch_size=[], client=client)
    progress["rows"] = torch.tensor(0)
    ctx = mp.get_context("spawn")
    training = ctx.Event()
    proc = ctx.Process(target=producer, args=(replay, progress, chunk, delay, training))
    proc.start()
    try:
        model = RewardModel()
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        losses, rows_seen, step = [], [], 0
        while step < steps:
            rows = int(progress["rows"])
            if rows < batch:
                if not proc.is_alive() and proc.exitcode:
                    raise RuntimeError(f"the producer failed ({proc.exitcode})")
                time.sleep(0.05)
                continue
            sample = replay[torch.randint(rows, (batch,))]  # only these rows move
            loss = torch.nn.functional.mse_loss(model(sample["obs"], sample["action"]),
                                                sample["reward"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            rows_seen.append(rows)
            step += 1
            training.set()
            if verbose and step % 50 == 0:
                print(f"step {step:4d}  rows {rows:5d}  loss {loss.item():.4f}", flush=True)
        proc.join(timeout=120)
        if proc.exitcode != 0:
            raise RuntimeError(f"the producer exited with {proc.exitcode}")
        final = replay.to_local()
        result = {
            "first_loss": sum(losses[:10]) / 10,
            "final_loss": sum(losses[-20:]) / 20,
            "rows_seen_first": rows_seen[0],
            "rows_seen_last": rows_seen[-1],
            "rows_written": int(progress["rows"]),
            "rewards_match": bool(torch.allclose(
                final["reward"], true_reward(final["obs"], final["action"]), atol=0.1)),
        }
        if verbose:
            print(result, flush=True)
        return result
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join()
        replay.drop()
        progress.drop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--addr", default=None, help="tdstored address ($TDSTORE_ADDR)")
    parser.add_argument("--capacity", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    main(args.addr, capacity=args.capacity, steps=args.steps)
