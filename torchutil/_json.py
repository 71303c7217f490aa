"""JSON of measured values: NaN and infinities (no timing on the meta device, no kernel trace, a
peak of 0) are not JSON numbers, so they are written as null."""
from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["json_safe", "loads"]


def loads(text: str | bytes) -> Any:
    """json.loads(text), where a document nested too deep for Python's reader (100,000 levels of
    `[`) is a ValueError like any other JSON that cannot be read, not a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep to read") from None


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float replaced by None, through dicts, lists and tuples
    (tuples come back as lists, as json.dumps writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
