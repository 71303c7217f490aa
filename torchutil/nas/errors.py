"""How torchutil.nas, and the NAS studies built on it, refuse a bad argument: one ValueError whose
message begins "torchutil.nas: "."""
from __future__ import annotations

__all__ = ["NAS", "nas_error"]

NAS = "torchutil.nas"  # how the NAS errors begin


def nas_error(message: str) -> ValueError:
    """The error of a bad argument to torchutil.nas or a NAS study: `raise nas_error("...")`."""
    return ValueError(f"{NAS}: {message}")
