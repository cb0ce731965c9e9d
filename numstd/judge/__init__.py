"""Layer 4: judging one output against one standard — ``check``, its criteria, chunks and verdict.

:mod:`.check` (``numstd.check``, ``assert_conforms``), :mod:`.criteria` (the per-element judge and
the pass criteria), :mod:`.chunks` (bounded-memory chunking), :mod:`.verdict` (the result and its
JSON/Arrow schema).
"""

__all__: list[str] = []
