"""The exception table (tdstore._errors) and real server errors reaching Python as it says."""

import pickle
import socket

import pytest
import torch

import tdstore
from tdstore import _errors

# gRPC code -> (class, builtins it must also be): the table of docs/python.md.
EXPECTED = {
    1: ("CancelledError", (RuntimeError,)),
    2: ("UnknownError", (RuntimeError,)),
    3: ("InvalidArgumentError", (ValueError, RuntimeError)),
    4: ("DeadlineExceededError", (ConnectionError, TimeoutError)),
    5: ("NotFoundError", (KeyError,)),
    6: ("AlreadyExistsError", (RuntimeError,)),
    7: ("PermissionDeniedError", (PermissionError,)),
    8: ("ResourceExhaustedError", (RuntimeError,)),
    9: ("FailedPreconditionError", (RuntimeError,)),
    10: ("AbortedError", (RuntimeError,)),
    11: ("OutOfRangeError", (IndexError,)),
    12: ("UnimplementedError", (NotImplementedError,)),
    13: ("InternalError", (RuntimeError,)),
    14: ("UnavailableError", (ConnectionError,)),
    15: ("DataLossError", (RuntimeError,)),
    16: ("UnauthenticatedError", (PermissionError,)),
}


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_factory_maps_each_code(code):
    name, builtins = EXPECTED[code]
    exc = _errors.error_from_status(code, "SOME_NAME", "the message")
    assert type(exc).__name__ == name
    assert type(exc) is getattr(tdstore, name)
    assert isinstance(exc, tdstore.Error)
    for b in builtins:
        assert isinstance(exc, b), (name, b)
    assert exc.code == code and exc.code_name == "SOME_NAME"
    assert exc.message == "the message"
    assert "the message" in str(exc) and "SOME_NAME" in str(exc)
    # Errors cross processes (DataLoader workers) with their code.
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and back.code == code and back.message == "the message"


def test_unknown_code_keeps_its_number():
    exc = _errors.error_from_status(99, "NEW_CODE", "m")
    assert isinstance(exc, tdstore.UnknownError) and exc.code == 99 and exc.code_name == "NEW_CODE"


def test_key_error_str_is_readable():
    exc = _errors.error_from_status(5, "NOT_FOUND", "no dict 'x'")
    assert str(exc) == "NOT_FOUND: no dict 'x'"  # not KeyError's quoted repr


def test_server_not_found_is_key_error(client):
    with pytest.raises(KeyError) as info:
        client.open("no-such-dict-here")
    assert isinstance(info.value, tdstore.NotFoundError) and info.value.code == 5
    with pytest.raises(KeyError):
        tdstore.TensorDictStore.from_store("no-such-dict-here", client=client)


def test_server_already_exists(client, new_store):
    td = new_store([2])
    with pytest.raises(tdstore.AlreadyExistsError) as info:
        tdstore.TensorDictStore(batch_size=[2], client=client, name=td.name)
    assert isinstance(info.value, RuntimeError) and info.value.code == 6


def test_server_out_of_range_is_index_error(new_store):
    td = new_store([4])
    td["a"] = torch.zeros(4)
    with pytest.raises(IndexError) as info:
        td[torch.tensor([0, 4])]
    assert isinstance(info.value, tdstore.OutOfRangeError) and info.value.code == 11
    with pytest.raises(IndexError):
        td[-5]


def test_server_invalid_argument_is_value_and_runtime_error(new_store):
    td = new_store([4])
    td["a"] = torch.zeros(4, 3)
    with pytest.raises(tdstore.InvalidArgumentError) as info:
        td[0:2] = {"a": torch.ones(2, 4)}  # does not broadcast to [2, 3]
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    assert info.value.code == 3


def test_unreachable_server_is_connection_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = tdstore.Client(f"127.0.0.1:{port}", timeout=2.0, retry_for=0.0)
    with pytest.raises(ConnectionError) as info:
        c.list()
    assert isinstance(info.value, tdstore.Error)
    assert info.value.code in (4, 14)


def test_unknown_client_option_is_type_error():
    with pytest.raises(TypeError, match="unknown tdstore client option"):
        tdstore.Client("127.0.0.1:1", host="x")


def test_addr_default_from_environment(monkeypatch, addr):
    monkeypatch.setenv("TDSTORE_ADDR", addr)
    assert tdstore.Client().address == addr
    monkeypatch.delenv("TDSTORE_ADDR")
    assert tdstore.Client().address == "127.0.0.1:50051"


def test_tokens_reach_tdstored_and_refusals_are_permission_errors(tokens_addr):
    from _helpers import TOKENS

    rw = tdstore.Client(tokens_addr, token=TOKENS["rw"])
    td = tdstore.TensorDictStore(batch_size=[2], client=rw, name=f"py-auth-{id(rw)}")
    try:
        td["a"] = torch.ones(2)
        ro = tdstore.TensorDictStore.from_store(td.name, addr=tokens_addr, token=TOKENS["ro"])
        assert torch.equal(ro["a"], torch.ones(2))  # ro may read
        with pytest.raises(PermissionError) as info:
            ro["a"] = torch.zeros(2)  # ... but not write
        assert isinstance(info.value, tdstore.PermissionDeniedError)
        with pytest.raises(tdstore.PermissionDeniedError):
            tdstore.TensorDictStore(batch_size=[1], client=rw, name="outside-the-prefix")
        with pytest.raises(PermissionError) as info:
            tdstore.Client(tokens_addr).list()  # no token
        assert isinstance(info.value, tdstore.UnauthenticatedError) and info.value.code == 16
        # A pickled store carries its token.
        import pickle

        back = pickle.loads(pickle.dumps(td))
        assert torch.equal(back["a"], torch.ones(2))
        assert torch.equal(ro["a"], torch.ones(2))  # the refused write changed nothing
    finally:
        td.drop()
