"""examples/python/replay_trainer.py runs: a spawned producer fills the store while the
trainer samples from it and learns."""

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


def test_replay_trainer(addr, monkeypatch):
    # On sys.path (not loaded from a file path) so the spawned producer can
    # import the same module.
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import replay_trainer

    result = replay_trainer.main(addr, capacity=2048, chunk=256, steps=200, delay=0.02,
                                  verbose=False)
    assert result["rows_written"] == 2048
    assert result["rewards_match"]  # every row the producer wrote arrived
    # Training went on while the producer was still filling.
    assert result["rows_seen_first"] < 2048
    assert result["final_loss"] < 0.2 * result["first_loss"], result
    assert "replay_trainer" in sys.modules


def test_shared_replay(addr, monkeypatch):
    """examples/python/shared_replay.py: two collector processes and a learner
    share one torchrl buffer through tdstored."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import shared_replay

    result = shared_replay.main(addr, capacity=4096, rows=1024, chunk=128, steps=150,
                                delay=0.02, verbose=False)
    assert result["exitcodes"] == [0, 0]
    assert result["rows_written"] == 2048
    assert result["rows_per_collector"] == [1024, 1024]  # neither overwrote the other
    assert result["rewards_match"]
    assert result["rows_seen_first"] < 2048  # the learner trained while they collected
    assert result["final_loss"] < 0.2 * result["first_loss"], result


def test_out_of_core_loader(addr, monkeypatch):
    """examples/python/out_of_core_loader.py: a DataLoader with 2 spawned
    workers reads an epoch of a 128 MiB dict in shuffled batches; every row
    arrives once with its own values, and no worker grows by more than a
    32 MiB budget, a quarter of the dataset (each reads half of it)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import out_of_core_loader

    result = out_of_core_loader.main(addr, rows=32_768, batch=512, budget_mib=32, verbose=False)
    assert result["dataset_mib"] > 4 * result["budget_mib"]
    assert result["every_row_once"]
    assert result["values_match"]
    assert result["workers"] == 2
    assert max(result["worker_growth_mib"]) < result["budget_mib"], result
