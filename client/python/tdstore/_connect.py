"""Which tdstored a store talks to: ``addr=``/``client=``, or the seed's
connection keywords.

tensordict's ``TensorDictStore`` (the seed) talks to Redis itself and takes
``backend=``, ``host=``, ``port=``, ``unix_socket_path=``, ``db=``,
``prefix=`` and ``cache_metadata=``. tdstore talks to tdstored, which owns the
Redis connection, so the same words mean:

* ``host=``/``port=`` (default ``localhost``/50051) or ``unix_socket_path=``:
  the tdstored to talk to, as ``addr="host:port"`` / ``"unix://path"`` would;
* ``backend=``: ``"tdstore"`` (or leaving it out); the seed's Redis-wire
  back ends are refused, saying what to pass instead;
* ``db=`` and ``prefix=``: which Redis database and key prefix hold the data
  is tdstored's choice (``--redis``, ``--namespace``), one per daemon, so
  only the seed's defaults (0, ``"tensordict"``) are accepted and anything
  else is refused rather than silently ignored;
* ``cache_metadata=``: the client's schema copy (``watch_schemas``).

Everything else is a :class:`tdstore.Client` option; an unknown keyword is a
TypeError that names it, raised before anything is created.
"""

from __future__ import annotations

from ._client import DEFAULT_ADDR, Client, check_options, resolve_addr

SEED_BACKENDS_REFUSED = ("redis", "dragonfly", "keydb")
SEED_DEFAULT_PREFIX = "tensordict"
DEFAULT_PORT = int(DEFAULT_ADDR.rsplit(":", 1)[1])

# The seed's connection keywords, as this module takes them.
SEED_KEYWORDS = ("backend", "host", "port", "unix_socket_path", "db", "prefix",
                 "cache_metadata")


def _addr_from(addr, host, port, unix_socket_path) -> str | None:
    if unix_socket_path is not None:
        if host is not None or port is not None:
            raise TypeError("unix_socket_path= and host=/port= name two different tdstoreds: "
                            "pass one")
        if addr is not None:
            raise TypeError("pass addr= or unix_socket_path=, not both")
        return f"unix://{unix_socket_path}"
    if host is None and port is None:
        return addr
    if addr is not None:
        raise TypeError("pass addr= or host=/port=, not both")
    return f"{host or 'localhost'}:{DEFAULT_PORT if port is None else int(port)}"


def _check_backend(backend) -> None:
    if backend is None or backend == "tdstore":
        return
    if backend in SEED_BACKENDS_REFUSED:
        raise ValueError(
            f"backend={backend!r}: tdstore talks to tdstored, which owns the Redis "
            "connection; pass backend='tdstore' (or leave it out) with addr='host:port' "
            "(or host=/port=) of tdstored, and give tdstored the Redis server "
            "(tdstored --redis redis://HOST:PORT)")
    raise ValueError(f"backend={backend!r} is not a tdstore back end: pass 'tdstore' "
                     "(or leave it out)")


def _check_namespace(db, prefix) -> None:
    if db not in (None, 0):
        raise ValueError(
            f"db={db!r}: tdstored chooses the Redis database (tdstored --redis "
            "redis://HOST:PORT/DB), one per daemon; leave db= out, or run a tdstored "
            "per database")
    if prefix not in (None, SEED_DEFAULT_PREFIX):
        raise ValueError(
            f"prefix={prefix!r}: tdstored chooses the key prefix (tdstored --namespace), "
            "one per daemon; leave prefix= out, or run a tdstored per namespace")


def split_options(addr, options: dict) -> tuple:
    """``(addr, client_options)`` from ``addr=`` and keyword ``options`` that
    may hold the seed's connection keywords; refuses unknown and
    contradictory ones (nothing connects)."""
    options = dict(options)
    seed = {k: options.pop(k) for k in SEED_KEYWORDS if k in options}
    _check_backend(seed.get("backend"))
    _check_namespace(seed.get("db"), seed.get("prefix"))
    addr = _addr_from(addr, seed.get("host"), seed.get("port"), seed.get("unix_socket_path"))
    cache = seed.get("cache_metadata")
    if cache is not None:
        if "watch_schemas" in options and bool(options["watch_schemas"]) != bool(cache):
            raise TypeError("cache_metadata= and watch_schemas= disagree: pass one")
        options["watch_schemas"] = bool(cache)
    return addr, check_options(options)


def client_for(addr, client, options: dict) -> Client:
    """The Client a store uses: ``client`` itself, or a new one for ``addr``
    (or the seed's keywords in ``options``) with the Client options in
    ``options``. Refuses unknown and contradictory keywords."""
    addr, options = split_options(addr, options)
    if client is None:
        return Client(addr, **options)
    watch = options.pop("watch_schemas", None)
    if options:
        raise TypeError("pass connection options to the Client, not with client=: "
                        f"{sorted(options)}")
    if watch is not None and bool(client.options.get("watch_schemas", True)) != watch:
        raise ValueError(f"cache_metadata={watch} but client= was made with "
                         f"watch_schemas={client.options.get('watch_schemas', True)}")
    if addr is not None and resolve_addr(addr) != client.address:
        raise ValueError(f"addr={addr!r} but client= connects to {client.address!r}")
    return client


def handle_options(client, options: dict) -> dict:
    """The Client options to open a handle with (a handle names its own
    tdstored, so no address may be given): ``client``'s, or ``options``."""
    if client is not None:
        client_for(None, client, options)  # refuses options beside client=
        return client.options
    addr, options = split_options(None, options)
    if addr is not None:
        raise TypeError("a handle names its tdstored: pass no host=/port=/unix_socket_path=")
    return options
