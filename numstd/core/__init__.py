"""Layer 0: the numbers themselves — formats, rounding, ULPs, compensated sums, ULP distributions.

Nothing here knows about ops or standards.  Modules: :mod:`.errors` (the one error hierarchy),
:mod:`.arrays` (numpy/torch/jax arrays to numpy), :mod:`.formats` (the format table and
``round_to``), :mod:`.ulp`, :mod:`.summation` (double-double building blocks), :mod:`.distribution`
(ULP-error distributions), :mod:`.native` (the optional compiled loops and the constants of their C
interface), :mod:`.blas` (small reference GEMMs on one OpenBLAS thread).
"""

__all__: list[str] = []
