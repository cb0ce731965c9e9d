"""Drop-in replacements for other harnesses' correctness checks (:mod:`.kernelbench`).

Nothing here is imported by ``import numstd``; each integration imports its framework lazily.
"""

__all__ = ["kernelbench"]
