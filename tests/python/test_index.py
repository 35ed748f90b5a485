"""tdstore._index.convert_index: torch indices -> native terms (pure Python, no server)."""

import numpy as np
import pytest
import torch

from tdstore._index import convert_index


def read_positions(term):
    kind, ptr, numel, shape = term
    assert kind == "positions"
    return ptr, numel, shape


def test_int_slice_ellipsis():
    c = convert_index((3, slice(1, None, 2), Ellipsis), (10, 8, 2))
    assert c.terms == [("int", 3), ("slice", 1, None, 2), ("ellipsis",)]
    assert c.post is None
    assert convert_index(-1, (4,)).terms == [("int", -1)]
    assert convert_index(slice(None), (4,)).terms == [("slice", None, None, 1)]
    assert convert_index(np.int64(2), (4,)).terms == [("int", 2)]


def test_positions_point_at_live_int64_memory():
    idx = torch.tensor([[3, 1], [0, 2]], dtype=torch.int32)
    c = convert_index(idx, (5,))
    (term,) = c.terms
    ptr, numel, shape = read_positions(term)
    assert numel == 4 and shape == (2, 2)
    (kept,) = c.keep
    assert kept.dtype == torch.int64 and kept.is_contiguous() and kept.data_ptr() == ptr
    assert kept.tolist() == [[3, 1], [0, 2]]


def test_list_range_ndarray_become_positions():
    for idx in ([4, 0, 4], range(0, 3), np.array([1, 2])):
        c = convert_index(idx, (5,))
        assert c.terms[0][0] == "positions"
        assert c.keep[0].tolist() == list(idx)
    c = convert_index([], (5,))
    assert c.terms[0][0] == "positions" and c.terms[0][2] == 0


def test_bool_lists_and_masks():
    c = convert_index([True, False, True], (3,))
    kind, ptr, numel = c.terms[0]
    assert kind == "mask" and numel == 3 and c.keep[0].dtype == torch.bool
    assert c.keep[0].data_ptr() == ptr


def test_nd_mask_becomes_nonzero_positions():
    mask = torch.tensor([[True, False, True], [False, True, False]])
    c = convert_index(mask, (2, 3, 4))
    assert [t[0] for t in c.terms] == ["positions", "positions"]
    rows, cols = (k.tolist() for k in c.keep)
    assert rows == [0, 0, 1] and cols == [0, 2, 1]


def test_mask_after_ellipsis_is_checked_against_the_last_dims():
    convert_index((Ellipsis, torch.ones(4, dtype=torch.bool)), (2, 3, 4))
    with pytest.raises(IndexError, match="shape of the mask"):
        convert_index((Ellipsis, torch.ones(3, dtype=torch.bool)), (2, 3, 4))


def test_errors_as_torch_raises_them():
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        convert_index(torch.tensor([0.0]), (3,))
    with pytest.raises(IndexError, match="too many indices"):
        convert_index((0, 0), (3,))
    with pytest.raises(IndexError, match="too many indices"):
        convert_index(0, ())
    with pytest.raises(IndexError, match="shape of the mask"):
        convert_index(torch.tensor([True, False]), (3,))
    with pytest.raises(ValueError, match="step must be greater than zero"):
        convert_index(slice(None, None, -1), (3,))
    with pytest.raises(IndexError, match="single ellipsis"):
        convert_index((Ellipsis, Ellipsis), (3,))
    with pytest.raises(IndexError, match="bool scalar"):
        convert_index(True, (3,))
    with pytest.raises(IndexError, match="cannot index with"):
        convert_index("a" if False else 1.5, (3,))


def test_none_is_applied_locally_afterwards():
    c = convert_index((None, 1, slice(0, 2), None), (4, 3))
    assert c.terms == [("int", 1), ("slice", 0, 2, 1)]
    assert c.post == (None, slice(None), None)
    with pytest.raises(IndexError, match="None"):
        convert_index((None, [0, 1]), (4,))
