"""How many threads numpy's BLAS (OpenBLAS) uses for one small product of a reference.

OpenBLAS runs a GEMM of more than about ``2**18`` multiply-adds on all its threads.  For the
small products of the references (:func:`numstd.reference.contraction.padded_matmul`: one call per
aligned block of 256 rows, e.g. ``256 × 512 × 32`` for a 32-row matmul) the work per thread is a
fraction of a millisecond, and on a machine whose cores are busy with other processes the call
waits for its second thread to be scheduled: 2–7 ms instead of 0.2 ms (measured on this project's
2-core machine, ``benchmarks/grade_cost.py``, docs/benchmarks.md §8).  :func:`blas_threads` runs
such a product on one thread.

The number of threads can change the bits of a GEMM (OpenBLAS 0.3.31, Haswell kernels: float32
for most shapes, float64 for some ``K > 256``): every summation order satisfies the same error
bound (Higham 2002, eq. (3.5)), which is all a reference relies on, but its bits must not depend on
anything but the product's shape.  So the choice is a function of the per-call shape alone
(``rows × K × N`` against :data:`SMALL_PRODUCT`), the same for every row chunk of a reference, and
a lock keeps one reference's calls from running while another thread has changed the count.  BLAS
calls made elsewhere in the process while a small product runs (another thread's own numpy
products) may run on one thread too.

Only OpenBLAS found loaded in the process (Linux: ``/proc/self/maps``) with its
``*set_num_threads*`` entry points is controlled; anything else (MKL, Accelerate, an unknown
build) leaves the thread count as it is, and :func:`blas_threads` does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from typing import Any, Iterator

__all__ = ["SMALL_PRODUCT", "blas_threads", "openblas_threads"]

SMALL_PRODUCT: int = 1 << 23
"""GEMM calls of at most this many multiply-adds (``rows × K × N``) run on one BLAS thread
(about 0.4 ms on one core of this project's machine)."""

_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"))

_LOCK = threading.RLock()


@functools.lru_cache(maxsize=None)
def openblas_threads() -> tuple[Any, Any] | None:
    """``(set_num_threads, get_num_threads)`` of the OpenBLAS that numpy uses, or None.

    The library is looked up among the shared objects mapped into the process whose file name
    contains ``openblas``; where several are, the one inside numpy's installation (its wheel's
    ``numpy.libs``) is taken, and none where that does not decide.  ``NUMSTD_BLAS_THREADS=0`` in
    the environment (read once) disables the control.
    """
    if os.environ.get("NUMSTD_BLAS_THREADS", "1") == "0":
        return None
    import numpy as np

    np.ones((2, 2)) @ np.ones((2, 2))  # (numpy's BLAS is loaded with numpy; a product makes sure)
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split(None, 5)[-1].strip() for line in f
                            if "openblas" in os.path.basename(line.rstrip()).lower()})
    except OSError:
        return None
    if len(paths) > 1:
        root = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
        mine = [p for p in paths if p.startswith(os.path.join(root, "numpy"))]
        paths = mine
    if len(paths) != 1:
        return None
    try:
        lib = ctypes.CDLL(paths[0])
    except OSError:
        return None
    for set_name, get_name in _SYMBOLS:
        if hasattr(lib, set_name) and hasattr(lib, get_name):
            setter, getter = getattr(lib, set_name), getattr(lib, get_name)
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            return setter, getter
    return None


@contextlib.contextmanager
def blas_threads(multiply_adds: int) -> Iterator[None]:
    """Run the BLAS calls inside the block on one thread when each has at most
    :data:`SMALL_PRODUCT` ``multiply_adds`` (the caller's per-call ``rows × K × N``), on the
    library's own count otherwise; either way the block holds the module's lock, so no other
    thread changes the count while it runs.  A no-op (but for the lock) where
    :func:`openblas_threads` found nothing to control.
    """
    control = openblas_threads()
    with _LOCK:
        if control is None or multiply_adds > SMALL_PRODUCT:
            yield
            return
        setter, getter = control
        previous = getter()
        if previous <= 1:
            yield
            return
        setter(1)
        try:
            yield
        finally:
            setter(previous)
