"""A tensordict user's code keeps working after swapping the import.

SEED_SCRIPT is written against ``tensordict.store.TensorDictStore`` (the seed,
over redis-py). The test runs it as is with the seed on the standalone
back end's Redis, then swaps the import and ``host=HOST, port=PORT`` for
``addr=ADDR`` and runs it with tdstore on both back ends: every value the
script records must be the same.
"""

import pytest

SEED_SCRIPT = '''
import torch
from tensordict import TensorDict
from tensordict.store import TensorDictStore

td = TensorDictStore(batch_size=[100], host=HOST, port=PORT)
td["obs"] = torch.arange(100 * 4, dtype=torch.float32).view(100, 4)
td["reward"] = torch.zeros(100)
td["next", "obs"] = torch.ones(100, 4)
td.set(("next", "done"), torch.zeros(100, dtype=torch.bool))
out["obs_sum"] = td["obs"].sum().item()
out["keys"] = sorted(map(str, td.keys(include_nested=True, leaves_only=True)))
out["top"] = sorted(td.keys())
out["batch_size"] = list(td.batch_size)

batch = td[torch.tensor([3, 7, 11])]
out["batch_type"] = type(batch).__name__
out["batch_obs"] = batch["obs"].tolist()
out["batch_next"] = batch["next", "obs"].shape
out["row"] = td[42]["obs"].tolist()
out["slice"] = td[10:13]["obs"][:, 0].tolist()

td[torch.tensor([0, 1])] = TensorDict({"reward": torch.tensor([1.0, 2.0])}, [2])
td[5:8] = TensorDict({"obs": torch.full((3, 4), -1.0)}, [3])
out["reward_head"] = td["reward"][:3].tolist()
out["obs_5"] = td["obs"][5].tolist()

nested = td["next"]
nested["obs"] = torch.full((100, 4), 2.0)
out["nested_sum"] = td["next", "obs"].sum().item()

local = td.to_local()
out["local_type"] = type(local).__name__
out["local_sum"] = local["obs"].sum().item()

td.update({"extra": torch.arange(100)})
out["extra"] = td["extra"][-3:].tolist()
out["in"] = ("next", "obs") in td.keys(True)
td.del_("extra")
td.rename_key_("reward", "r")
out["after"] = sorted(td.keys())
mask = td["r"] > 0
out["masked"] = td[mask]["r"].tolist()
td.fill_("r", 3.0)
out["filled"] = td["r"][:2].tolist()

remote = TensorDictStore.from_tensordict(local, host=HOST, port=PORT)
out["remote_shape"] = list(remote["obs"].shape)
again = TensorDictStore.from_store(host=HOST, port=PORT, td_id=td._td_id)
out["again"] = again["obs"][5].tolist()

store = TensorDictStore.from_schema(
    {"obs": ([3], torch.uint8), "reward": ([], torch.float32)},
    batch_size=[10], host=HOST, port=PORT)
store[0] = TensorDict(obs=torch.tensor([1, 2, 3], dtype=torch.uint8),
                      reward=torch.tensor(0.5), batch_size=[])
out["schema"] = (store["obs"][0].tolist(), store["reward"][:2].tolist(), store["obs"].dtype)

td.clear_redis()
remote.clear_redis()
store.clear_redis()
'''


def swap_to_tdstore(script: str) -> str:
    """What a user does: the import, and host=/port= for addr=."""
    swapped = script.replace("from tensordict.store import TensorDictStore",
                             "from tdstore import TensorDictStore")
    swapped = swapped.replace("host=HOST, port=PORT", "addr=ADDR")
    assert "HOST" not in swapped and "tensordict.store" not in swapped
    return swapped


def run(script: str, **names) -> dict:
    out: dict = {}
    exec(compile(script, "<user script>", "exec"), {"out": out, **names})
    return out


@pytest.fixture(scope="module")
def seed_result(standalone_redis_port):
    return run(SEED_SCRIPT, HOST="127.0.0.1", PORT=standalone_redis_port)


def test_user_script_after_swapping_the_import(seed_result, addr):
    ours = run(swap_to_tdstore(SEED_SCRIPT), ADDR=addr)
    assert set(ours) == set(seed_result)
    for key in seed_result:
        assert ours[key] == seed_result[key], key
