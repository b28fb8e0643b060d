"""The tagged codec: the only way data crosses between trusted and untrusted processes."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verimap.sandbox.worker import wire as W

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.complex_numbers(allow_nan=False)
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner), max_leaves=8
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner, inner)
        | st.sets(hashables)
        | st.frozensets(hashables)
        | st.dictionaries(st.text(), inner)
        | st.dictionaries(hashables, inner)
    ),
    max_leaves=20,
)


def roundtrip(v):
    import json

    return W.decode(json.loads(json.dumps(W.encode(v), allow_nan=False)))


@given(values)
def test_roundtrip_preserves_value_and_exact_types(v):
    out = roundtrip(v)
    assert out == v
    assert type(out) is type(v)


def test_non_finite_floats_survive_strict_json():
    out = roundtrip([math.inf, -math.inf, math.nan, complex(math.nan, math.inf)])
    assert out[0] == math.inf and out[1] == -math.inf and math.isnan(out[2])
    assert math.isnan(out[3].real) and out[3].imag == math.inf


def test_dict_with_tag_key_is_not_confused_with_a_tag():
    v = {"$t": "tuple", "v": [1]}
    assert roundtrip(v) == v and type(roundtrip(v)) is dict


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize("bad", [AlwaysEqual(1), object(), [1, AlwaysEqual(2)], {"k": lambda: 1}])
def test_objects_and_subclasses_are_refused(bad):
    with pytest.raises(W.CodecError, match="cannot cross the sandbox boundary"):
        W.encode(bad)


def test_decode_only_yields_builtin_types():
    with pytest.raises(W.CodecError):
        W.decode({"$t": "pickle", "v": "..."})
