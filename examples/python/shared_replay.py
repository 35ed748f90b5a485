"""Two collector processes and one learner sharing a torchrl replay buffer
through tdstored.

    python examples/python/shared_replay.py --addr 127.0.0.1:50051

* The learner makes a ``ReplayBuffer`` on ``TdStoreStorage`` (a tdstore dict
  named here) with ``TdStoreWriter`` and torchrl's ``prefetch``.
* Two collectors (spawned processes) open the same buffer by name and
  ``extend`` it with transitions chunk by chunk. Their writer reserves rows
  with one atomic step in the store, so neither overwrites the other's.
* Meanwhile the learner samples and fits a tiny model predicting the reward
  from (obs, action); the rewards come from a fixed linear function, so the
  loss falls. The buffer's length is one figure for all three processes.

The buffer's dict is dropped at the end.
"""

from __future__ import annotations

import argparse
import time
import uuid

import torch
import torch.multiprocessing as mp
from tensordict import TensorDict
from torchrl.data import ReplayBuffer

from tdstore import TensorDictStore
from tdstore.torchrl import TdStoreStorage, TdStoreWriter

OBS, ACTIONS = 8, 4


def true_reward(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    return obs @ torch.linspace(-1.0, 1.0, OBS) + torch.tensor([0.5, -0.5, 1.0, 0.0])[action]


def collector(name: str, addr: str, capacity: int, seed: int, rows: int, chunk: int,
              delay: float, learning) -> None:
    """Extend the shared buffer with ``rows`` transitions (a spawned process).
    After its first chunk it waits until the learner has seen rows
    (``learning``), so every run shows learning while collecting, however
    busy the machine."""
    rb = ReplayBuffer(storage=TdStoreStorage(capacity, name=name, addr=addr),
                      writer=TdStoreWriter())
    g = torch.Generator().manual_seed(seed)
    for i in range(0, rows, chunk):
        if i == chunk:
            learning.wait(120)
        obs = torch.randn(chunk, OBS, generator=g)
        action = torch.randint(ACTIONS, (chunk,), generator=g)
        rb.extend(TensorDict({"obs": obs, "action": action,
                              "reward": true_reward(obs, action),
                              "collector": torch.full((chunk,), seed)}, [chunk]))
        time.sleep(delay)


def main(addr: str, capacity: int = 4096, rows: int = 1024, chunk: int = 128, steps: int = 150,
         delay: float = 0.02, verbose: bool = True) -> dict:
    name = f"shared-replay-{uuid.uuid4().hex[:8]}"
    rb = ReplayBuffer(storage=TdStoreStorage(capacity, name=name, addr=addr),
                      batch_size=128, prefetch=2)
    ctx = mp.get_context("spawn")
    learning = ctx.Event()
    procs = [ctx.Process(target=collector,
                         args=(name, addr, capacity, seed, rows, chunk, delay, learning))
             for seed in (1, 2)]
    for p in procs:
        p.start()
    model = torch.nn.Linear(OBS + ACTIONS, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    try:
        while len(rb) < chunk:  # the first rows
            time.sleep(0.01)
        seen_first = len(rb)
        learning.set()
        for _ in range(steps):
            batch = rb.sample()
            x = torch.cat([batch["obs"], torch.nn.functional.one_hot(batch["action"], ACTIONS)
                           .float()], 1)
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), batch["reward"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        for p in procs:
            p.join(120)
        exitcodes = [p.exitcode for p in procs]
        # A storage opened now reads the length afresh (the learner's may
        # reuse one read within its length_ttl).
        final = TdStoreStorage(capacity, name=name, addr=addr)
        written = len(final)
        stored = final.get(torch.arange(written))
        result = {
            "rows_written": written,
            "rows_seen_first": seen_first,
            "exitcodes": exitcodes,
            "rows_per_collector": [int((stored["collector"] == s).sum()) for s in (1, 2)],
            "rewards_match": bool(torch.allclose(stored["reward"],
                                                 true_reward(stored["obs"], stored["action"]))),
            "first_loss": sum(losses[:10]) / 10,
            "final_loss": sum(losses[-10:]) / 10,
        }
        if verbose:
            print(result)
        return result
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        TensorDictStore.from_store(name, addr=addr).drop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", default=None)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    main(args.addr, steps=args.steps)
