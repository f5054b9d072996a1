"""fp8kit's writer of the monitor's rows (_fp8kit.rows_text, lib's io/python_text.hpp) against
Python's own csv and json modules, which wrote those files before: the same bytes for every value
type the rows hold, for doubles drawn from every binade and at the boundaries of repr()'s layouts."""

import csv
import io
import json
import math
import random
import struct

import pytest
from fp8kit import _fp8kit


def python_text(rows, keys):
    """What the monitor wrote with Python's modules: csv.writer's lines, json.dumps of the dicts."""
    f = io.StringIO(newline="")
    csv.writer(f).writerows(rows)
    objs = json.dumps([dict(zip(keys, r)) for r in rows], allow_nan=True)[1:-1]
    return f.getvalue().encode(), objs.encode()


def doubles(n, seed):
    """n doubles from random bit patterns (every binade, subnormals, NaN payloads and signs)."""
    rng = random.Random(seed)
    return [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(n)]


def boundaries():
    """Values where repr() changes layout or digit count: powers of ten around 1e-4 / 1e-5 and
    1e15 / 1e16 / 1e17 and their neighbours, integers as floats, the extremes."""
    out = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    for e in range(-330, 310):
        for m in (1.0, 1.5, 9.999999999999999, 123456789.0):
            v = m * 10.0**e if abs(e) < 300 else float(f"{m}e{e}")
            out += [v, -v, math.nextafter(v, math.inf), math.nextafter(v, 0.0)]
    out += [float(2**k) for k in range(0, 80)] + [float(10**k) + 1 for k in range(14, 18)]
    out += [0.1, 0.2, 0.30000000000000004, 1 / 3, 2 / 3, 448.0, 57344.0, 2.0**-126, 2.0**-149]
    return out


KEYS2 = ["value", "neg"]


@pytest.mark.parametrize(
    "values", [boundaries(), doubles(200_000, 1), doubles(200_000, 2)], ids=["edges", "bits1", "bits2"]
)
def test_floats_as_python_writes_them(values):
    rows = [(v, -v) for v in values]
    assert _fp8kit.rows_text(rows, KEYS2) == python_text(rows, KEYS2)


def test_every_value_type_of_a_row():
    keys = ["step", "tensor", "flag", "none", "big", "amax", 'name with "quote"', "é"]
    names = [
        "h.0.mlp.c_fc.input",
        "a,b",
        'say "hi"',
        "line\nbreak",
        "cr\rhere",
        "tab\there",
        "",
        " lead space",
        "é ü 中文",
        "emoji 😀",
        "ctl \x01\x1f\x7f\b\f",
        "back\\slash",
    ]
    rows = []
    for i, n in enumerate(names):
        rows.append((i, n, i % 2 == 0, None, 2**70 + i, (i + 1) / 7, -(2**63) - i, 2**63 - 1))
    assert _fp8kit.rows_text(rows, keys) == python_text(rows, keys)
    assert _fp8kit.rows_text([], keys) == (b"", b"")


def test_bad_rows_are_refused_naming_the_column():
    with pytest.raises(ValueError, match="row 0 has 1 values for 2 keys"):
        _fp8kit.rows_text([(1,)], KEYS2)
    with pytest.raises(TypeError, match="column 'neg': a list"):
        _fp8kit.rows_text([(1, [2])], KEYS2)
    with pytest.raises(TypeError, match="a row"):
        _fp8kit.rows_text([5], KEYS2)
