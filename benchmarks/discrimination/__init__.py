"""Discrimination benchmark: does a correctness check accept legitimate kernels and reject bugs?

Every variant of :mod:`numstd.corpus` (legitimate implementations and realistic bugs) runs on the
suite cases of every default standard (seed 101, never used by calibration); numstd's verdict and
the fixed tolerances of today's harnesses (``methods.toml``) judge the same outputs.

Modules: :mod:`.methods` (the fixed-tolerance rules), :mod:`.sweep` (standards, subjects, cases,
runs), :mod:`.score` (detection and false-rejection rates), :mod:`.report` (markdown tables),
:mod:`.benchmark` (the whole benchmark, used by ``benchmarks/run.py`` and ``python -m
benchmarks.discrimination``).  Nothing runs at import.
"""

__all__ = ["benchmark", "methods", "report", "score", "sweep"]
