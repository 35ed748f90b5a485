"""fork() after gRPC: a clear error in the child instead of a hung parent.

gRPC (the native core's transport) does not survive fork(): a forked child
that makes any call, through an inherited connection or a new one, can
leave the *parent's* next call hanging forever (measured here: the child's
call succeeds, the parent's next read never returns). DataLoader workers are
forked by default on Linux, so this is easy to hit.

So every object holding native state registers here. In a child forked from
a process that has used gRPC, each registered object's native parts are set
aside (kept alive, never used, never destroyed: destroying them could touch
the shared state too) and replaced by ``ForkedChild``, whose every use
raises a RuntimeError saying to use the spawn or forkserver start method;
new connections in that child raise the same error. A child forked before
any connection was made is unaffected.

Native objects registered nowhere (a bare Dict from ``Client.open()`` whose
Client is gone) are covered one level down: the core never destroys a
connection in a process other than the one that made it, so dropping one in
the child leaks it there instead of joining threads the child does not have
(client/core/src/client.cc, MakeImpl).
"""

from __future__ import annotations

import os
import weakref

_live: "weakref.WeakSet" = weakref.WeakSet()  # objects holding native state
_grpc_used = False    # this process made a native client at some point
_forked_after_grpc = False  # this process is such a child
_inherited: list = []  # native objects set aside in the child

MESSAGE = (
    "this process was forked from one that had already used tdstore (gRPC); gRPC "
    "cannot be used after fork() (it would hang the parent's next call). Start "
    "workers with the 'spawn' or 'forkserver' method (e.g. DataLoader("
    "multiprocessing_context='spawn'), torch.multiprocessing.get_context('spawn')): "
    "a TensorDictStore pickles as a handle and opens the same dict there."
)


class ForkedChild:
    """Stands in for native objects in a forked child: any use raises."""

    def __getattr__(self, name):
        raise RuntimeError(MESSAGE)


def before_native_call() -> None:
    """Call before making a native client (or opening a handle)."""
    global _grpc_used
    if _forked_after_grpc:
        raise RuntimeError(MESSAGE)
    _grpc_used = True


def register(obj) -> None:
    """``obj`` holds native objects in the attributes its class names in
    ``_native_attrs``."""
    _live.add(obj)


def _after_fork_in_child() -> None:
    global _forked_after_grpc
    if not _grpc_used:
        return
    _forked_after_grpc = True
    import ctypes

    for obj in list(_live):
        for attr in type(obj)._native_attrs:
            native = obj.__dict__.get(attr)
            if native is None or isinstance(native, ForkedChild):
                continue
            # One reference that is never released: not even the
            # interpreter's teardown at exit may run its destructor here.
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(native))
            _inherited.append(native)
            obj.__dict__[attr] = ForkedChild()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
