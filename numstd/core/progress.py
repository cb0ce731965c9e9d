"""Progress bars of the commands: tqdm on stderr, drawn only when stderr is a terminal.

Every long-running command (calibrate, survey, report, capture, grade, the discrimination
benchmark) reports progress through one of these adapters, so output piped to a file or read by
a tool stays clean (``tqdm(disable=None)`` would also switch off for non-TTYs; the test here is
explicit so that ``NUMSTD_PROGRESS=1`` can force a bar, ``0`` suppress it).  tqdm is imported
when a bar is first drawn, never by ``import numstd``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable, Iterator, TypeVar

__all__ = ["enabled", "bar", "iterate", "counter", "stages"]

T = TypeVar("T")


def enabled(stream: Any = None) -> bool:
    """Whether bars are drawn: ``NUMSTD_PROGRESS`` = 1/0 decides; otherwise when ``stream``
    (default stderr) is a terminal."""
    forced = os.environ.get("NUMSTD_PROGRESS", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class _Null:
    """What :func:`bar` returns when bars are off: every tqdm method used here, doing nothing."""

    n = 0
    total = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description_str(self, text: str, refresh: bool = True) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "_Null":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def bar(total: int | float | None, desc: str, unit: str = "it", *, on: bool | None = None) -> Any:
    """A tqdm bar on stderr (or a do-nothing stand-in when bars are off or tqdm is missing)."""
    if not (enabled() if on is None else on):
        return _Null()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Null()
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)


def iterate(items: Iterable[T], desc: str, unit: str = "it", total: int | None = None) -> Iterator[T]:
    """``items`` with a bar advancing once per item."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    b = bar(total, desc, unit)
    try:
        for x in items:
            yield x
            b.update(1)
    finally:
        b.close()


def counter(desc: str, unit: str = "task") -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback (calibrate, capture, sweeps) drawing one bar; the bar
    closes when ``done`` reaches ``total``."""
    state: dict[str, Any] = {"bar": None}

    def show(done: int, total: int) -> None:
        b = state["bar"]
        if b is None:
            b = state["bar"] = bar(total, desc, unit)
        b.total = total
        b.update(done - b.n)
        if done >= total:
            b.close()
            state["bar"] = None

    return show


def stages(desc: str) -> Callable[[str, float], None]:
    """A ``progress(stage, fraction)`` callback (survey) drawing a percentage bar named by stage."""
    state: dict[str, Any] = {"bar": None}

    def show(stage: str, frac: float) -> None:
        b = state["bar"]
        if b is None:
            b = state["bar"] = bar(100, desc, "%")
        b.set_description_str(f"{desc}: {stage}", refresh=False)
        b.update(int(round(100 * min(max(frac, 0.0), 1.0))) - b.n)
        if frac >= 1:
            b.close()
            state["bar"] = None

    return show
