"""tdstore's exceptions: one class per gRPC status code, in ONE table.

Every error the native core raises reaches Python through
``error_from_status(code, code_name, message)`` (installed with
``_native.set_error_factory`` when the package is imported), so the class a
caller sees depends on the gRPC code alone, but for one case: a write that
had returned before tdstored applied it (written behind) and failed is a
``WriteBehindError`` whatever its code, raised by the next call.

Each class derives from :class:`Error` (``.code``: the gRPC number,
``.code_name``: its name, ``.message``: tdstored's text) and from the builtin
exception a tensordict user already catches for the same mistake on a local
``TensorDict``:

==================== ======================== ===========================================
gRPC code            class                    also a
==================== ======================== ===========================================
NOT_FOUND            NotFoundError            KeyError (unknown key, unknown dict)
OUT_OF_RANGE         OutOfRangeError          IndexError (index out of bounds)
INVALID_ARGUMENT     InvalidArgumentError     ValueError *and* RuntimeError (see below)
ALREADY_EXISTS       AlreadyExistsError       RuntimeError
FAILED_PRECONDITION  FailedPreconditionError  RuntimeError (a leaf where a sub-dict is)
ABORTED              AbortedError             RuntimeError (retry)
RESOURCE_EXHAUSTED   ResourceExhaustedError   RuntimeError (a server limit, not local RAM)
UNAVAILABLE          UnavailableError         ConnectionError
DEADLINE_EXCEEDED    DeadlineExceededError    ConnectionError and TimeoutError
PERMISSION_DENIED    PermissionDeniedError    PermissionError
UNAUTHENTICATED      UnauthenticatedError     PermissionError
UNIMPLEMENTED        UnimplementedError       NotImplementedError
CANCELLED, UNKNOWN,  CancelledError, ...      RuntimeError
INTERNAL, DATA_LOSS
==================== ======================== ===========================================

Why INVALID_ARGUMENT is both: for the mistakes tdstored reports as
INVALID_ARGUMENT a local TensorDict raises ValueError in some cases (a slice
step <= 0) and RuntimeError in others (a value whose shape does not broadcast
to the indexed rows, a leaf whose batch dims are wrong). One class that is
both keeps ``except ValueError`` and ``except RuntimeError`` code working.

Why RESOURCE_EXHAUSTED is not MemoryError: it means a limit of tdstored or of
Redis (``--max-indexed-bytes``, ``maxmemory``) refused the call; this
process' memory is fine, and code that reacts to MemoryError (freeing caches,
gc) would react to the wrong thing. torch's own out-of-memory error is a
RuntimeError too.
"""

from __future__ import annotations


class Error(Exception):
    """Base of every tdstore error.

    Attributes:
        code: the gRPC status code (int), e.g. 5 for NOT_FOUND.
        code_name: its name, e.g. ``"NOT_FOUND"``.
        message: the text tdstored (or the client core) gave.
    """

    code: int = 2
    code_name: str = "UNKNOWN"

    def __init__(self, message: str = ""):
        # Only the message goes to the builtin base: OSError subclasses
        # (ConnectionError, PermissionError) read extra positional arguments
        # as errno/strerror/filename.
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        # KeyError's own __str__ would print the message with quotes.
        return f"{self.code_name}: {self.message}"

    def __reduce__(self):
        # Picklable (errors cross process boundaries, e.g. DataLoader workers)
        # with the code of this instance, not only the class default.
        return (_rebuild, (type(self), self.message, self.code, self.code_name))


def _rebuild(cls, message, code, code_name):
    exc = cls(message)
    exc.code = code
    exc.code_name = code_name
    return exc


def _error_class(name: str, code: int, code_name: str, *bases: type, doc: str) -> type:
    return type(name, (Error, *bases), {"code": code, "code_name": code_name, "__doc__": doc})


CancelledError = _error_class("CancelledError", 1, "CANCELLED", RuntimeError,
                              doc="The call was cancelled (nothing was written).")
UnknownError = _error_class("UnknownError", 2, "UNKNOWN", RuntimeError,
                            doc="An error gRPC could not classify.")
InvalidArgumentError = _error_class(
    "InvalidArgumentError", 3, "INVALID_ARGUMENT", ValueError, RuntimeError,
    doc="Bad name, path, dtype, shape or index; the store is unchanged.")
DeadlineExceededError = _error_class(
    "DeadlineExceededError", 4, "DEADLINE_EXCEEDED", ConnectionError, TimeoutError,
    doc="The call ran past the client's timeout.")
NotFoundError = _error_class("NotFoundError", 5, "NOT_FOUND", KeyError,
                             doc="Unknown dict, leaf or path.")
AlreadyExistsError = _error_class("AlreadyExistsError", 6, "ALREADY_EXISTS", RuntimeError,
                                  doc="Create or rename onto a name that is taken.")
PermissionDeniedError = _error_class(
    "PermissionDeniedError", 7, "PERMISSION_DENIED", PermissionError,
    doc="The token may not touch this dict, or may only read it.")
ResourceExhaustedError = _error_class(
    "ResourceExhaustedError", 8, "RESOURCE_EXHAUSTED", RuntimeError,
    doc="A limit of tdstored or Redis refused the call (the message names it).")
FailedPreconditionError = _error_class(
    "FailedPreconditionError", 9, "FAILED_PRECONDITION", RuntimeError,
    doc="The store's state forbids the call (e.g. a leaf where a sub-dict would go).")
AbortedError = _error_class("AbortedError", 10, "ABORTED", RuntimeError,
                            doc="A concurrent change aborted the call; retry it.")
OutOfRangeError = _error_class("OutOfRangeError", 11, "OUT_OF_RANGE", IndexError,
                               doc="An index outside its batch dim.")
UnimplementedError = _error_class("UnimplementedError", 12, "UNIMPLEMENTED",
                                  NotImplementedError,
                                  doc="tdstored does not implement this call.")
InternalError = _error_class("InternalError", 13, "INTERNAL", RuntimeError,
                             doc="An unexpected error in tdstored or Redis.")
UnavailableError = _error_class("UnavailableError", 14, "UNAVAILABLE", ConnectionError,
                                doc="tdstored or its Redis cannot be reached (retryable).")
DataLossError = _error_class("DataLossError", 15, "DATA_LOSS", RuntimeError,
                             doc="Redis holds records tdstore cannot parse.")
UnauthenticatedError = _error_class(
    "UnauthenticatedError", 16, "UNAUTHENTICATED", PermissionError,
    doc="tdstored needs a token and the call carried none or an unknown one.")

# THE mapping: gRPC code -> class. Nothing else decides which class an error gets.
ERROR_CLASSES: dict[int, type] = {
    cls.code: cls
    for cls in (
        CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
        NotFoundError, AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError,
        InternalError, UnavailableError, DataLossError, UnauthenticatedError,
    )
}


class WriteBehindError(Error):
    """A write that had returned before tdstored applied it (a torchrl extend
    written behind, docs/python.md, *Writes behind*) failed; raised by the
    client's next call, which did nothing else. ``.code``/``.code_name``
    are the write's own; ``.dropped``: writes queued after it that failed
    with it (sent in its call) or were not sent.

    Deliberately none of the builtins the other classes are: code that
    takes its own call's ``KeyError`` for "absent" or retries its own
    ``ValueError`` must not swallow another write's failure."""

    dropped: int = 0

    def __reduce__(self):
        return (_rebuild_behind, (self.message, self.code, self.code_name, self.dropped))


def _rebuild_behind(message, code, code_name, dropped):
    exc = _rebuild(WriteBehindError, message, code, code_name)
    exc.dropped = dropped
    return exc


def error_from_status(code: int, code_name: str, message: str, dropped: int = -1) -> Error:
    """Build the exception for a gRPC status (the native module's error
    factory); ``dropped`` >= 0: a write behind's failure (WriteBehindError)."""
    if dropped >= 0:
        exc = WriteBehindError(message)
        exc.code, exc.code_name, exc.dropped = code, code_name, dropped
        return exc
    cls = ERROR_CLASSES.get(code, UnknownError)
    exc = cls(message)
    # Keep the code the server sent even for codes we have no class of.
    exc.code = code
    exc.code_name = code_name
    return exc


__all__ = ["Error", "ERROR_CLASSES", "WriteBehindError", "error_from_status"] + [
    cls.__name__ for cls in ERROR_CLASSES.values()
]
