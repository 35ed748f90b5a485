"""``tdstore.Client``: a connection to one tdstored, thin over ``_native.Client``."""

from __future__ import annotations

import os

from . import _fork, _native

DEFAULT_ADDR = "127.0.0.1:50051"

# The keyword options _native.Client and _native.open_handle take (NATIVE_API.md).
CLIENT_OPTIONS = (
    "token",
    "tls",
    "tls_root_ca_pem",
    "tls_client_cert_pem",
    "tls_client_key_pem",
    "tls_server_name",
    "timeout",
    "retry_for",
    "chunk_bytes",
    "watch_schemas",
    "shared_memory_bytes",
)


def resolve_addr(addr: str | None) -> str:
    """``addr`` if given, else ``$TDSTORE_ADDR``, else ``127.0.0.1:50051``."""
    if addr:
        return addr
    return os.environ.get("TDSTORE_ADDR") or DEFAULT_ADDR


def check_options(options: dict) -> dict:
    unknown = sorted(set(options) - set(CLIENT_OPTIONS))
    if unknown:
        raise TypeError(
            f"unknown tdstore client option(s) {unknown}; known: {list(CLIENT_OPTIONS)}"
        )
    return dict(options)


class Client:
    """A connection to tdstored.

    ``Client(addr=None, *, token="", tls=False, tls_root_ca_pem="",
    tls_client_cert_pem="", tls_client_key_pem="", tls_server_name="",
    timeout=600.0, retry_for=30.0, chunk_bytes=1 << 20, watch_schemas=True,
    shared_memory_bytes=64 << 20)``

    ``addr`` is ``host:port`` or ``unix:///path.sock``; it defaults to
    ``$TDSTORE_ADDR``, then ``127.0.0.1:50051``. Nothing connects until the
    first call; gRPC reconnects after failures. ``timeout`` (seconds) bounds
    each call; ``retry_for`` (seconds) is how long UNAVAILABLE calls are
    retried (docs/protocol.md, *Retries*). ``watch_schemas`` answers
    ``keys()``, ``in`` and the dtypes and shapes a write needs from a schema
    copy that tdstored keeps current over a watch stream, with no round trip
    (docs/python.md, *Schema watch*); False asks tdstored every time.
    ``shared_memory_bytes``: on a ``unix://`` address, or a loopback TCP
    one (``127.0.0.1``, ``localhost``, ``[::1]``), whose tdstored offers
    it, the size of the memfd region lent to tdstored so that a call's bytes
    cross through shared memory instead of the socket (docs/protocol.md,
    *Same-host data path*); 0 never lends one.
    Thread-safe: share one Client
    between threads.

    Methods return native ``Dict`` objects (``create``/``open``) that
    :class:`tdstore.TensorDictStore` wraps; most code wants
    ``TensorDictStore(..., client=c)`` or ``TensorDictStore.from_store(name,
    client=c)`` instead.
    """

    _native_attrs = ("_native",)  # replaced in a forked child (see _fork)

    def __init__(self, addr: str | None = None, **options):
        self._options = check_options(options)
        _fork.before_native_call()
        self._native = _native.Client(resolve_addr(addr), **self._options)
        _fork.register(self)

    @classmethod
    def _wrap(cls, native_client, options: dict) -> "Client":
        obj = cls.__new__(cls)
        obj._options = dict(options)
        obj._native = native_client
        _fork.register(obj)
        return obj

    @property
    def address(self) -> str:
        return self._native.address

    @property
    def options(self) -> dict:
        """The keyword options this client was made with (a copy)."""
        return dict(self._options)

    def create(self, name: str, batch_size, schema=(), *, rows_per_block: int = 0,
               part_bytes: int = 0, layout: str = "leaves"):
        """Create dict ``name`` (ALREADY_EXISTS if taken); returns a native Dict.

        ``schema``: ``(path, dtype_name, element_shape)`` leaves to pre-allocate
        zero-filled, ``path`` a tuple of str. ``layout``: ``"leaves"`` or
        ``"record"`` (docs/python.md, *Record dicts*).
        """
        return self._native.create(name, [int(s) for s in batch_size], list(schema),
                                   rows_per_block, part_bytes, layout)

    def open(self, name: str):
        """Open dict ``name`` (NOT_FOUND -> KeyError); returns a native Dict."""
        return self._native.open(name)

    def list(self) -> list:
        """Names of every dict the caller may read, sorted."""
        return self._native.list()

    def drop(self, name: str) -> None:
        """Delete dict ``name`` and all its data (NOT_FOUND if absent)."""
        self._native.drop(name)

    def rename(self, name: str, new_name: str) -> None:
        """Rename a dict atomically (NOT_FOUND / ALREADY_EXISTS)."""
        self._native.rename(name, new_name)

    def server_info(self) -> dict:
        """``dict(version, backend, redis_masters, redis_ok)`` of tdstored."""
        return self._native.server_info()

    def shares_memory(self) -> bool:
        """Whether calls' bytes cross through shared memory rather than the
        socket (``shared_memory_bytes``; docs/protocol.md, *Same-host data
        path*). Lends tdstored a region now if none is lent and one may be."""
        return self._native.shares_memory()

    def __repr__(self) -> str:
        return f"tdstore.Client({self.address!r})"

    def __reduce__(self):
        return (_rebuild_client, (self.address, self._options))


def _rebuild_client(addr, options):
    return Client(addr, **options)
