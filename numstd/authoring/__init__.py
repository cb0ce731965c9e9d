"""Layer 5: making standards — calibration (:mod:`.calibrate`), captures on real backends
(:mod:`.capture`), publication (:mod:`.publish`), resumable sweeps (:mod:`.sweep`) on an executor
(:mod:`.executor`: process pool or Ray), and the generated catalog pages (:mod:`.docs`).
"""

__all__: list[str] = []
