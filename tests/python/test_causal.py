"""Causal schema reads (docs/protocol.md, *Causal schema reads*).

Process B (causal_writer.py) changes a dict's schema (a key added, one
deleted, a sub-dict renamed, a resize, a lock or unlock), then bumps a counter. This
process (A) polls the counter until it shows B's step (B then waits for A's
acknowledgement on its stdin, outside tdstored) and at once asks
``in``, ``keys()``, ``batch_size`` and ``is_locked``, which its watched copy
answers. Not one answer may be older than B's step: through the same
tdstored, through a second one, and while the pub/sub connections are cut.
"""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
import torch

import conftest
from tdstore import TensorDictStore

STEPS = 1000
WRITER = Path(__file__).with_name("causal_writer.py")


@pytest.fixture(scope="session")
def second_addr(addr, _procs, tmp_path_factory):
    """A second tdstored on the back end of ``addr``."""
    kind = next(k for k, a in conftest.ADDRS.items() if a == addr)
    base = tmp_path_factory.mktemp(f"second-{kind}")
    try:
        return conftest.start_tdstored(_procs, base, conftest.REDIS_URLS[kind], name="second")
    except (conftest.StartError, OSError) as err:
        pytest.fail(f"cannot start a second tdstored: {err}", pytrace=False)


def _redis_ports(addr):
    kind = next(k for k, a in conftest.ADDRS.items() if a == addr)
    url = conftest.REDIS_URLS[kind]
    return [int(node.rsplit(":", 1)[1]) for node in url.split("://", 1)[1].split(",")]


def _check_steps(addr, writer_addr, tmp_path):
    td = TensorDictStore(batch_size=[10], addr=addr)
    td["s0", "v"] = torch.zeros(10)
    assert "k1" not in td  # the copy is watched from here on
    log = tmp_path / "causal_writer.log"
    with open(log, "wb") as out:
        writer = subprocess.Popen([sys.executable, str(WRITER), writer_addr, td.name, str(STEPS)],
                                  stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)
    stale = []
    try:
        for i in range(1, STEPS + 1):
            while td.counter_get("step") < i:
                time.sleep(50e-6)  # spaces the polls; the check comes after
                if writer.poll() is not None:
                    pytest.fail(f"causal_writer exited {writer.returncode} before step {i}:\n"
                                f"{log.read_text()[-3000:]}")
            answers = {
                f"k{i} in td": f"k{i}" in td,
                f"k{i - 1} not in td": f"k{i - 1}" not in td,
                f"(s{i}, v) in td": (f"s{i}", "v") in td,
                f"s{i - 1} not in td": f"s{i - 1}" not in td,
                f"k{i} in keys()": f"k{i}" in list(td.keys()),
                f"s{i - 1} not in keys()": f"s{i - 1}" not in list(td.keys()),
                "batch_size": td.batch_size == torch.Size([10 + i]),
                "is_locked": td.is_locked == (i % 2 == 1),
            }
            stale += [f"step {i}: {what}" for what, ok in answers.items() if not ok]
            writer.stdin.write(b"a")
            writer.stdin.flush()
        assert writer.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        td._client.drop(td.name)
    return stale


def test_another_process_change_is_seen_once_something_after_it_was(addr, tmp_path):
    stale = _check_steps(addr, addr, tmp_path)
    assert not stale, f"{len(stale)} stale answers in {STEPS} steps: {stale[:5]}"


def test_a_change_through_another_daemon_is_seen_once_something_after_it_was(
        addr, second_addr, tmp_path):
    stale = _check_steps(addr, second_addr, tmp_path)
    assert not stale, f"{len(stale)} stale answers in {STEPS} steps: {stale[:5]}"


def test_nothing_is_stale_while_the_pubsub_connections_are_cut(addr, second_addr, tmp_path):
    done = threading.Event()

    def cut():
        nodes = [redis.Redis(port=p) for p in _redis_ports(addr)]
        while not done.is_set():
            for node in nodes:
                node.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            time.sleep(0.02)

    cutter = threading.Thread(target=cut)
    cutter.start()
    try:
        stale = _check_steps(addr, second_addr, tmp_path)
    finally:
        done.set()
        cutter.join()
    assert not stale, f"{len(stale)} stale answers in {STEPS} steps: {stale[:5]}"


def test_two_stores_of_one_process_see_each_others_changes_at_once(addr):
    a = TensorDictStore(batch_size=[4], addr=addr)
    b = TensorDictStore.from_store(a.name, addr=addr)
    assert not b.is_locked  # watched from here on
    stale = 0
    try:
        for i in range(200):
            a.lock_()
            stale += not b.is_locked
            a.unlock_()
            stale += b.is_locked
            a[f"k{i}"] = torch.zeros(4)
            stale += f"k{i}" not in b
            stale += f"k{i}" not in list(b.keys())
    finally:
        a._client.drop(a.name)
    assert stale == 0, f"{stale} stale answers of 800"
