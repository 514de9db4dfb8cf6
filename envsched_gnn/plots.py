"""Matplotlib without a display, for the figures the reports and the evidence picture write."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 110, **options: Any) -> Path:
    """Lay ``fig`` out, write it to ``path`` (``options``: more of ``savefig``'s, such as
    ``metadata``) and close it; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, **options)
    pyplot().close(fig)
    return Path(path)
