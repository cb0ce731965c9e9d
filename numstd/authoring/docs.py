"""Generated documentation of the standards: ``docs/standards/<op>.md``, one anchor per ID.

``python -m numstd docs`` regenerates it; a test fails when the committed pages differ from what
the standard files generate (stale docs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["render_standard", "render", "generate", "default_out"]


def _anchor(key: str) -> str:
    return key.lower().replace("@", "-v")


def render_standard(s) -> str:  # noqa: ANN001 - Standard
    """Human-readable text of one standard (also used by the docs generator)."""
    c = s.criteria
    consts = ", ".join(f"{k} = {v:g}" for k, v in sorted(s.model.constants.items())) or "none"
    lines = [
        f"{s.key} — {s.title}",
        f"  status: {s.status}{' (default for its formats)' if s.default else ''}; sha256 {s.sha256}",
        f"  op: {s.op}; inputs {', '.join(s.formats['inputs'])}; accumulate {s.accumulate.name}; output {s.output.name}",
    ]
    if s.selector:
        lines.append(f"  selected by: {', '.join(f'{k}={v!r}' for k, v in s.selector.items())}")
    if s.supersedes:
        lines.append(f"  supersedes: {s.supersedes}")
    if s.op == "module":  # graded by numstd.grade: the fields mean something else (docs/grading.md)
        from ..grade.grading import describe_module_standard

        text = describe_module_standard(s)
        lines += (text.splitlines() if isinstance(text, str) else list(text))
    else:
        lines += [
            "  bound:  B_i = E_i + rho·ulp_out(|r_i| + E_i)" + (" + 2^emin_out (flush-to-zero allowed)" if s.model.ftz else "")
            + " + reference error",
            f"          E_i = {s.model.error.text}",
            f"          rho = {s.model.rho:g} ulp; constants: {consts}",
            "  criteria:",
            "    bound: |a_i − r_i| ≤ B_i for " + ("every element" if c.bound_max_fraction == 0 else
                                                      f"all but a fraction {c.bound_max_fraction:g} of the elements"),
            f"    bias:  |mean signed ulp error| ≤ {c.bias_tau:g} + {c.bias_z:g}·max(sd, rho/√3)/√n_eff over elements "
            f"with E_i ≤ {c.bias_kappa:g}·ulp"
            + (f" (tested when the sample holds at least {c.bias_min_n} independent elements)" if c.bias_min_n > 1 else "")
            + (", relative to the correctly rounded output's mean and shifted by the mean shift of any subset "
               "of the op's constants rounded to the compute format" if c.rounded_constants else "")
            + (", relative to the correctly rounded output's mean, which may be shifted by the mean shift of the "
               "intermediates the op's 16-bit kernel stores (rounded to the output format)"
               if getattr(c, "stored_shift", False) else "")
            + ("; the standard error is row-clustered: the larger of max(sd, rho/√3)/√n_eff and sd(row means)/√R "
               "over the R rows (slices along the scan axis) with a bias-sample element" if c.bias_rows else ""),
        ]
        if c.row_bias:
            lines.append(f"    row_bias: |mean over groups of mean sign(r_i)·(a_i − r_i)/B_i| ≤ {c.row_bias_tau:g} + "
                         + (f"{c.row_bias_rel:g}·mean(u_acc·|r_i|/B_i) + " if c.row_bias_rel and not c.row_bias_drift else "")
                         + (f"({c.row_bias_rel:g} + {c.row_bias_drift})·mean(u_acc·|r_i|/B_i) + " if c.row_bias_drift else "") +
                         f"t_R({c.row_bias_z:g})·sd/√R over the R groups that share an error (rows of softmax, "
                         "log_softmax, layer_norm; one output of sum, mean, matmul)")
        lines += [
            f"    specials: non-finite positions match the reference (policy {c.nan_policy}); signed zero "
            + ("compared" if c.signed_zero else "ignored")
            + ("; non-finite outputs allowed where an intermediate may overflow the accumulate format "
               "(spillmag ≥ its overflow threshold)" if c.intermediate_overflow else "")
            + ("; after a product of contiguous factors may have left the accumulate format's range (spillmag "
               "or sinkmag beyond its limits, numstd.judge.criteria.exit_mask) a 0 or non-finite output is not "
               "judged and is counted" if getattr(c, "range_exit", False) else ""),
            f"    output rounding accepted: {', '.join(c.output_rounding)}",
        ]
        if c.ulp_max is not None:
            lines.append(f"    ulp_max: {c.ulp_max:g}")
        for q, v in sorted(c.ulp_quantiles.items()):
            lines.append(f"    ulp quantile {q:g}: ≤ {v:g}")
    lines.append("  rationale:")
    lines += ["    " + line for line in s.rationale.splitlines()]
    if s.citations:
        lines.append("  citations:")
        lines += [f"    - {x}" for x in s.citations]
    lines.append("  provenance:")
    lines += [f"    {k}: {v}" for k, v in s.provenance.items()]
    return "\n".join(lines)


def render(root: Any = None) -> dict[str, str]:
    """``{file name: markdown}`` for every op with standards, plus ``README.md`` (the index)."""
    from ..catalog.registry import list_standards

    stds = list_standards(root=root)
    pages: dict[str, str] = {}
    ops = sorted({s.op for s in stds})
    index = ["# numstd standards catalog", "",
             "Generated from `standards/` by `python -m numstd docs`; do not edit. Cite a standard as",
             "`ID@N`; each has an anchor below. Formulas and their sources: [methodology](../methodology.md).", "",
             "| standard | op | inputs → output (accumulate) | status | default |", "|---|---|---|---|---|"]
    for s in stds:
        index.append(f"| [{s.key}]({s.op}.md#{_anchor(s.key)}) | {s.op} | {' × '.join(s.formats['inputs'])} → "
                     f"{s.output.name} ({s.accumulate.name}) | {s.status} | {'yes' if s.default else ''}"
                     f"{' (' + ', '.join(f'{k}={v}' for k, v in s.selector.items()) + ')' if s.selector else ''} |")
    index.append("")
    index.append(f"{len(stds)} standards.")
    index += [""] + coverage_table(stds)
    pages["README.md"] = "\n".join(index) + "\n"
    for op in ops:
        lines = [f"# {op}", "", "Generated from `standards/" + op + "/`; do not edit.", ""]
        for s in (x for x in stds if x.op == op):
            lines += [f'<a id="{_anchor(s.key)}"></a>', f"## {s.key}", "", "```text", render_standard(s), "```", ""]
        pages[f"{op}.md"] = "\n".join(lines)
    return pages


_COVERAGE_BACKENDS = ("numpy", "torch:cpu", "jax:cpu", "nki")  # (torch:cuda, jax:gpu, torch-neuronx run the same calls)


def coverage_table(stds: list) -> list[str]:
    """Markdown lines: for every catalog op, the inputs → output combinations its standards cover and
    the backends that run it (:meth:`numstd.backends.Backend.ops`; no library is imported)."""
    from ..backends import get
    from ..ops import OPS

    runs = {name: get(name).ops() for name in _COVERAGE_BACKENDS}
    lines = ["## Ops, standards and backends", "",
             "Every catalog op, the inputs → output combinations its standards cover (a selector in parentheses), "
             "and which backends run its library "
             "kernel (`torch:cuda`, `jax:gpu`, `jax:neuron` and `torch-neuronx` run the `torch:cpu` / `jax:cpu` calls "
             "on their device; `python -m numstd backends` says which are available here).", "",
             "| op | standards (inputs → output) | " + " | ".join(f"`{b}`" for b in _COVERAGE_BACKENDS) + " |",
             "|---|---|" + "---|" * len(_COVERAGE_BACKENDS)]
    for op in sorted(OPS):
        defaults = sorted({f"{'×'.join(sorted(set(s.formats['inputs'])))} → {s.output.name}"
                           + (" (" + ", ".join(f"{k}={v}" for k, v in s.selector.items()) + ")" if s.selector else "")
                           for s in stds if s.op == op})
        lines.append(f"| {op} | {'; '.join(defaults) or '–'} | "
                     + " | ".join("yes" if op in runs[b] else "" for b in _COVERAGE_BACKENDS) + " |")
    lines += ["", f"{len(OPS)} ops; backends: " + ", ".join(f"`{b}` {len(runs[b])}" for b in _COVERAGE_BACKENDS) + "."]
    return lines


def generate(out: str | Path, standards_root: Any = None) -> list[Path]:
    """Write the pages to ``out`` (removing stale ones); returns the written paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pages = render(standards_root)
    for old in out.glob("*.md"):
        if old.name not in pages:
            old.unlink()
    written = []
    for name, text in pages.items():
        p = out / name
        p.write_text(text, encoding="utf-8")
        written.append(p)
    return written


def default_out() -> Path:
    """``docs/standards`` of the source checkout numstd runs from.

    Raises
    ------
    ParameterError
        When numstd is installed from a wheel (no checkout around its standards: the default would
        be inside site-packages); the message says to pass ``--out``.
    """
    from importlib import resources

    from ..core.errors import ParameterError

    # (resolved: in a checkout numstd/standards is a link to the top-level standards/)
    root = Path(str(resources.files("numstd.standards"))).resolve().parent
    if not ((root / "pyproject.toml").is_file() and (root / "docs").is_dir()):
        raise ParameterError(f"numstd is installed outside a source checkout ({root}); pass --out DIR to write "
                             "the standards' pages somewhere, e.g. python -m numstd docs --out numstd-docs")
    return root / "docs" / "standards"
