"""The KV cache before serving: `fp8kit kv`. docs/inference.md, "The KV cache"."""

import json
import os

from . import _fp8kit
from ._dump import warn_skipped

KvError = _fp8kit.KvError
# The names kv() accepts, from lib's tables (aliases such as "fp8" or "modelopt" are accepted too).
FORMATS = tuple(_fp8kit.kv_format_names())
POLICIES = tuple(_fp8kit.kv_policy_names())


def kv(dumps, formats=(), policies=(), bucket=32, attention=True):
    """Casts the Q, K and V tensors of `dumps` (paths; `<layer>.q/.k/.v` as fp8kit.torch.Monitor(
    attention=True) writes them, [batch, heads, positions, head_dim], each step one batch, step 0
    the first) to each cache format under each scale policy (empty: all).

    Returns the report as a dict whose tables are lists of records, so pandas reads each as is:
    pandas.DataFrame(r["rows"]) (one row per layer, tensor, head, format, policy: scale, saturated,
    underflow, sqnr_db, ...), r["positions"] (per position bucket of `bucket` positions) and
    r["attention"] (FP8 attention per layer and query head, E4M3, per policy); plus steps, batch,
    positions, head_dim, layers, notes and skipped (datasets skipped on purpose, also named in a
    UserWarning). Raises KvError (a ValueError) on bad input."""
    if isinstance(dumps, (str, os.PathLike)):
        dumps = [dumps]
    if isinstance(formats, str):
        formats = [formats]
    if isinstance(policies, str):
        policies = [policies]
    r = json.loads(
        _fp8kit.kv_json([os.fspath(d) for d in dumps], list(formats), list(policies), int(bucket), bool(attention))
    )
    warn_skipped(r["skipped"])
    return r
