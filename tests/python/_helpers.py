"""Comparisons and constants shared by the tests."""

import multiprocessing

import torch
from tensordict import TensorDictBase


def leaves(td: TensorDictBase) -> dict:
    """Nested key -> tensor, for every leaf."""
    return {k: td.get(k) for k in td.keys(include_nested=True, leaves_only=True)}


def assert_td_equal(actual: TensorDictBase, expected: TensorDictBase):
    assert actual.batch_size == expected.batch_size, (actual.batch_size, expected.batch_size)
    a, e = leaves(actual), leaves(expected)
    assert sorted(map(str, a)) == sorted(map(str, e)), (list(a), list(e))
    for key, want in e.items():
        got = a[key]
        assert got.dtype == want.dtype, (key, got.dtype, want.dtype)
        assert got.shape == want.shape, (key, got.shape, want.shape)
        assert torch.equal(got.cpu(), want.cpu()), (key, got, want)


def worker_context():
    """The multiprocessing context for tests whose point is another process
    (what it sees, what it writes at the same time), not how it started.

    A forkserver, so each worker is forked from one process that imported
    torch, tensordict, torchrl and tdstore once, instead of a spawned
    interpreter importing them again (about 4 s of CPU a worker here). The
    worker still receives its dict by handle, pickled as with spawn, and
    opens its own connection: the forkserver never connects to tdstored,
    so nothing gRPC holds is forked. test_processes.py keeps "spawn" where
    starting that way is what it checks.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "tensordict", "torchrl", "tdstore", "torch.multiprocessing"])
    return ctx


# Tokens of the tokens_addr tdstored (conftest.py): rw and ro on dicts named py-auth-*.
TOKENS = {"rw": "py-test-token-rw-0123456789", "ro": "py-test-token-ro-0123456789"}


def random_index(rng, n: int):
    """A random index over a batch dim of n: an int, a slice, a step slice,
    positions (repeats allowed) or a mask, as torch takes them."""
    kind = rng.choice(["int", "slice", "step", "list", "mask"])
    if kind == "int":
        return rng.randrange(-n, n)
    if kind == "slice":
        a = rng.randrange(0, n)
        return slice(a, rng.randrange(a, n + 1))
    if kind == "step":
        return slice(rng.randrange(0, n), None, rng.randrange(1, 4))
    if kind == "list":
        return torch.tensor([rng.randrange(n) for _ in range(rng.randrange(1, 5))])
    return torch.tensor([rng.random() < 0.4 for _ in range(n)])


# A tensorclass the tests store; importable by name in spawned children.
from tensordict import tensorclass  # noqa: E402


@tensorclass
class Episode:
    obs: torch.Tensor
    reward: torch.Tensor
    name: str
    info: dict
