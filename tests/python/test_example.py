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
