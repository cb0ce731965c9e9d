"""numstd.core.blas: small reference products on one OpenBLAS thread (docs/benchmarks.md §8)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from numstd.core import blas
from numstd.reference import contraction


def _control():
    c = blas.openblas_threads()
    if c is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose thread count can be set")
    return c


def test_small_products_run_on_one_thread_and_the_count_is_restored():
    setter, getter = _control()
    before = getter()
    with blas.blas_threads(blas.SMALL_PRODUCT):
        inside = getter()
    with blas.blas_threads(blas.SMALL_PRODUCT + 1):
        large = getter()
    assert inside == 1
    assert large == before and getter() == before


_ONE_THREAD = """
import numpy as np
g = np.random.default_rng(7)
a, b = g.standard_normal((256, 300)), g.standard_normal((300, 24))
a32, b32 = np.abs(a).astype(np.float32), np.abs(b).astype(np.float32)
np.save({out!r}, np.concatenate([(a @ b).ravel(), (a32 @ b32).astype(np.float64).ravel()]))
"""


def test_padded_matmul_of_a_small_product_is_the_one_thread_product(tmp_path):
    # independent: the same GEMMs in a fresh process whose OpenBLAS was started with one thread
    _control()
    out = tmp_path / "one.npy"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", _ONE_THREAD.format(out=str(out))], env=env, check=True, timeout=120)
    g = np.random.default_rng(7)
    a, b = g.standard_normal((256, 300)), g.standard_normal((300, 24))
    a32, b32 = np.abs(a).astype(np.float32), np.abs(b).astype(np.float32)
    mine = np.concatenate([contraction.padded_matmul(a, b).ravel(),
                           contraction.padded_matmul(a32, b32).astype(np.float64).ravel()])
    np.testing.assert_array_equal(mine, np.load(out))


def test_a_concurrent_large_product_keeps_its_thread_count():
    # a thread that keeps running small products must not change the count under a large one
    setter, getter = _control()
    if getter() < 2:
        pytest.skip("OpenBLAS runs one thread here")
    stop, seen = threading.Event(), []
    x = np.ones((256, 64))

    def small() -> None:
        while not stop.is_set():
            contraction.padded_matmul(x, np.ones((64, 8)))

    t = threading.Thread(target=small)
    t.start()
    try:
        for _ in range(50):
            with blas.blas_threads(blas.SMALL_PRODUCT + 1):
                seen.append(getter())
    finally:
        stop.set()
        t.join()
    assert set(seen) == {getter()}


def test_padded_matmul_reuses_a_zero_block_that_is_zero_again_after_every_call(monkeypatch):
    # independent truth: the product of the explicitly zero-padded 256-row block
    g = np.random.default_rng(9)
    b = g.standard_normal((64, 8))
    for row0, m in ((0, 5), (3, 40), (250, 6), (7, 1)):
        a = g.standard_normal((m, 64))
        full = np.zeros((512, 64))
        full[row0:row0 + m] = a
        want = np.concatenate([full[:256] @ b, full[256:] @ b])[row0:row0 + m]
        np.testing.assert_array_equal(contraction.padded_matmul(a, b, row0), want)
        assert all(not blk.any() for blk in contraction._BLOCKS.kept.values())

    def boom(*args, **kw):
        raise MemoryError("planted")

    monkeypatch.setattr(contraction.np, "matmul", boom)
    with pytest.raises(MemoryError):
        contraction.padded_matmul(g.standard_normal((3, 64)), b, 10)
    monkeypatch.undo()
    assert all(not blk.any() for blk in contraction._BLOCKS.kept.values())
