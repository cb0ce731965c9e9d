"""Layer 3: the standards as data — loading and integrity (:mod:`.registry`), the calibration
templates (:mod:`.templates`) and the seeded input suites (:mod:`.suites`).

The standard files themselves live in the data package ``numstd.standards`` (the repository's
``standards/``); this package only reads them.
"""

__all__: list[str] = []
