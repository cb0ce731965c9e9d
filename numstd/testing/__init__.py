"""numstd for test suites: Hypothesis strategies (:mod:`.strategies`) and the pytest plugin
(:mod:`.pytest_plugin`, registered as the ``numstd`` pytest11 entry point)."""

__all__: list[str] = []
