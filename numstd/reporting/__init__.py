"""Layer 5: reports of saved verdicts and grade reports for people (:mod:`.html`: Markdown/HTML)."""

__all__: list[str] = []
