"""torchrl replay buffers on tdstore: ``TdStoreStorage`` and ``TdStoreWriter``.

    from torchrl.data import ReplayBuffer
    from tdstore.torchrl import TdStoreStorage, TdStoreWriter

    rb = ReplayBuffer(storage=TdStoreStorage(100_000, name="replay", addr=addr),
                      writer=TdStoreWriter(), batch_size=256)
    rb.extend(TensorDict({"obs": obs, "action": action}, [64]))
    batch = rb.sample()

``TdStoreStorage`` is a torchrl ``Storage`` whose rows live in one tdstore
dict of batch size ``[max_size]`` (``ndim=1``), named ``name`` (a fresh name if not
given): any process that names it (or its ``handle``) shares it. The dict
is created on the first write, empty; that write's indexed rows make
tdstored create each leaf zero-filled from the batch's own shapes and
dtypes, so no zero tensor crosses the wire.

The buffer's length is the dict's counter ``tdstore.rb.written``: the rows
ever written along dim 0, capped at dim 0's size, times the elements of a
row (``ndim >= 2``), as torchrl's own storages count them. Every process
reads the same figure (one round trip a ``len``).

Rows are what torchrl's tensor storages hold: TensorDicts, tensorclasses,
plain tensors and pytrees (dicts, tuples, lists of tensors), with every
batch dim they had; ``get`` and ``sample`` give back what was stored, in
any process (``_rows.py``).

``TdStoreWriter`` is torchrl's round-robin writer with its cursor in the
store as well: each ``extend`` reserves its rows with one atomic counter
step (``tdstore.rb.cursor``), so collectors in several processes or on
several machines extend one buffer without overwriting each other's rows.
torchrl's default writer keeps its cursor in the process: it is right for a
single writing process only. What stays per process is torchrl's: a
prioritized sampler's priorities are those its own process wrote or
updated. A row another writer reserved is counted once written; until then
(a few milliseconds) sampling it reads zeros.

Needs torchrl (pinned in deploy/python-requirements.txt).
"""

from ._storage import TdStoreStorage
from ._writer import TdStoreWriter

__all__ = ["TdStoreStorage", "TdStoreWriter"]
