"""numstd.check next to the fixed-tolerance checks of today's harnesses, on one output.

Each method below is the harness's own call, run on the candidate output and on ``expected``, the
float64 reference (:func:`numstd.reference.reference`, the exact op on the exact inputs) rounded
once (RNE) to the output's format, as a harness compares two tensors of the same dtype:

``assert_close``
    ``torch.testing.assert_close(actual, expected)`` with its default tolerances for the dtype
    (fp32 rtol 1.3e-6 / atol 1e-5, fp16 1e-3 / 1e-5, bf16 1.6e-2 / 1e-5), ``equal_nan=False``.
``kernelbench``
    KernelBench's correctness test (``src/kernelbench/eval.py``, ``run_and_check_correctness``):
    ``torch.allclose(output, output_new, atol=tol, rtol=tol)`` with ``output`` the reference and
    ``tol = get_tolerance_for_precision(precision)``: 1e-4 for fp32, 1e-2 for fp16 and bf16.  Note
    the argument order: ``torch.allclose(input, other)`` tests ``|input − other| ≤ atol +
    rtol·|other|``, so KernelBench's relative tolerance scales with the *candidate*, and the
    comparison runs in the tensors' dtype.
``kernelbench_v01``
    The same call with ``atol = rtol = 1e-2`` for every precision (KernelBench v0 and v0.1, as the
    comment in eval.py records).
``np_allclose``
    ``numpy.allclose(actual, expected)`` with its defaults (rtol 1e-5, atol 1e-8), in float64.

A result whose shape differs from the reference's fails every method.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["METHODS", "LABELS", "KERNELBENCH_TOL", "expected_for", "judge_all", "truth"]

#: KernelBench's get_tolerance_for_precision (src/kernelbench/eval.py): one value used as atol and rtol
KERNELBENCH_TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}

LABELS = {
    "numstd": "numstd.check (default standard)",
    "assert_close": "torch.testing.assert_close (defaults)",
    "kernelbench": "KernelBench torch.allclose (1e-4 fp32, 1e-2 16-bit)",
    "kernelbench_v01": "KernelBench v0.1 (atol = rtol = 1e-2)",
    "np_allclose": "np.allclose (defaults)",
}


def truth(op: str, inputs: list, params: dict) -> np.ndarray:
    """The float64 reference values of ``op`` on the exact ``inputs``."""
    from numstd.reference import reference

    return np.asarray(reference(op, inputs, **params).values, dtype=np.float64)


def expected_for(values: np.ndarray, fmt: str) -> np.ndarray:
    """``values`` (float64) rounded once (RNE) to ``fmt``, as a numpy array of that format."""
    from numstd.formats import get_format, round_to

    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(round_to(np.asarray(values, dtype=np.float64), get_format(fmt)))


def _tensor(a: np.ndarray) -> Any:
    import torch

    from numstd.backends.torch_backend import to_torch

    return to_torch(np.asarray(a), torch.device("cpu"))


def _assert_close(act: Any, exp: Any, fmt: str) -> bool:
    import torch

    try:
        torch.testing.assert_close(act, exp)
    except AssertionError:
        return False
    return True


def _kernelbench(tol: float | None) -> Callable[[Any, Any, str], bool]:
    def judge(act: Any, exp: Any, fmt: str) -> bool:
        import torch

        t = KERNELBENCH_TOL.get(fmt, 1e-4) if tol is None else tol
        return bool(torch.allclose(exp, act, atol=t, rtol=t))  # (reference, candidate), as eval.py

    return judge


def _np_allclose(act: Any, exp: Any, fmt: str) -> bool:
    a = act.double().numpy()
    e = exp.double().numpy()
    return bool(np.allclose(a, e))


METHODS: dict[str, Callable[[Any, Any, str], bool]] = {
    "assert_close": _assert_close,
    "kernelbench": _kernelbench(None),
    "kernelbench_v01": _kernelbench(1e-2),
    "np_allclose": _np_allclose,
}


def judge_all(actual: np.ndarray, expected: np.ndarray, fmt: str) -> dict[str, bool]:
    """Pass/fail of ``actual`` under each fixed-tolerance method of :data:`METHODS`.

    Parameters
    ----------
    actual : numpy.ndarray
        The candidate output (any float dtype numstd reads; cast to the output format ``fmt``
        first, as the harness would hold it).
    expected : numpy.ndarray
        :func:`expected_for` of the reference, in format ``fmt``.
    fmt : str
        The output format's name.
    """
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return {k: False for k in METHODS}
    if a.dtype != e.dtype:
        a = expected_for(a.astype(np.float64), fmt)
    ta, te = _tensor(a), _tensor(e)
    return {k: fn(ta, te, fmt) for k, fn in METHODS.items()}
