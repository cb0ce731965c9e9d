"""Layer 4: resumable sweeps of many tasks (:mod:`.sweep`: the Parquet dataset of results, resume
after a crash, the code fingerprint) on an executor (:mod:`.executor`: serial, process pool or Ray).
Calibration, captures and surveys run on them."""

__all__: list[str] = []
