"""Regenerate the example outputs in README.md, docs/reviewers.md and docs/cli.md by running them.

Each example in those files is a marker line ``<!-- example: NAME -->`` followed by a fenced block;
this script replaces the block with what NAME prints now, so the docs show real output and cannot
drift.  ``--check`` changes nothing and exits 1 when a block differs (tests/test_doc_examples.py
checks README.md and docs/reviewers.md that way; docs/cli.md's examples run every command,
calibrate included, and name the installed backends, so regenerate it with this script after a
change to the CLI).

    python scripts/doc_examples.py                 # rewrite the blocks of all three files
    python scripts/doc_examples.py --check README.md docs/reviewers.md

The CLI examples run ``python -m numstd …`` in a fresh temporary directory holding the files they
read (a bf16 softmax case as safetensors, a KernelBench problem and candidate), with progress bars
off; the temporary path is written as ``.`` and durations as ``… s`` (they vary run to run).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
FILES = ("README.md", "docs/reviewers.md", "docs/cli.md")
MARKER = re.compile(r"^<!-- example: (?P<name>[\w-]+) -->\n```(?P<lang>\w*)\n.*?^```\n", re.M | re.S)


# ------------------------------------------------------------------------------ the cases
def _softmax_case():
    """A bf16 softmax input and two outputs: rounded once from float64 (correct), and truncated."""
    import numpy as np

    from numstd.formats import round_to

    rng = np.random.default_rng(0)
    x = round_to(rng.normal(size=(64, 512)), "bfloat16")
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    ref = e / e.sum(axis=-1, keepdims=True)
    return x, round_to(ref, "bfloat16"), round_to(ref, "bfloat16", mode="rtz")


def _use_snippet() -> str:
    import numstd

    x, _, out = _softmax_case()
    v = numstd.check(out, op="softmax", inputs=[x], axis=-1)
    return "\n".join([">>> v.passed, v.standard_id, v.ulp.max, round(v.ulp.mean_signed, 3)",
                      repr((v.passed, v.standard_id, v.ulp.max, round(v.ulp.mean_signed, 3))),
                      ">>> print(v.snippet())", v.snippet()])


def _reviewer_quote() -> str:
    import numstd

    x, _, out = _softmax_case()
    v = numstd.check(out, op="softmax", inputs=[x], axis=-1)
    bias = next(c for c in v.criteria if c.name == "bias")
    return f"fails {v.citation}: bias criterion, {bias.message} — the output is truncated to bf16 instead of rounded"


def _layernorm_message() -> str:
    import numpy as np

    import numstd
    from numstd.formats import round_to

    rng = np.random.default_rng(1)
    x = round_to(rng.normal(0.0, 0.01, size=(64, 1024)), "bfloat16")  # rows of small variance
    w = round_to(np.ones(1024), "bfloat16")
    b = round_to(np.zeros(1024), "bfloat16")
    x64 = x.astype(np.float64)
    kernel = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-3)  # eps 1e-3, not 1e-5
    v = numstd.check(round_to(kernel, "bfloat16"), op="layer_norm", inputs=[x, w, b], eps=1e-5)
    return v.message


# ------------------------------------------------------------------------------ the CLI
def _prepare(work: Path) -> None:
    from numstd.tensorio import save

    x, good, trunc = _softmax_case()
    save(work / "case.safetensors", {"x": x, "rounded": good, "truncated": trunc})
    for name in ("problem.py", "faithful.py"):
        shutil.copy(ROOT / "tests" / "problems" / "softmax" / name, work / name)


CLI = {
    "cli-list": "python -m numstd list --op softmax",
    "cli-show": "python -m numstd show NS-SOFTMAX-BF16@1",
    "cli-check-pass": "python -m numstd check --op softmax --param axis=-1 --inputs case.safetensors:x "
                      "--actual case.safetensors:rounded",
    "cli-check-fail": "python -m numstd check --op softmax --param axis=-1 --inputs case.safetensors:x "
                      "--actual case.safetensors:truncated",
    "cli-check-json": "python -m numstd check --op softmax --inputs case.safetensors:x --actual case.safetensors:truncated "
                      "--json > verdict.json; python -m numstd report verdict.json --out report",
    "cli-survey": "python -m numstd survey --op exp --format bfloat16 --quiet",
    "cli-backends": "python -m numstd backends",
    "cli-capture": "python -m numstd capture --standard NS-SOFTMAX-BF16 --backend numpy --quick --out softmax-numpy.parquet",
    "cli-compare": "python -m numstd capture --standard NS-SOFTMAX-BF16 --backend numpy --quick --out a.parquet "
                   "> /dev/null; python -m numstd compare a.parquet",
    "cli-calibrate": "python -m numstd calibrate --op matmul --inputs bfloat16 --quick --out calib-out",
    "cli-publish": "python -m numstd calibrate --op matmul --inputs bfloat16 --quick --out calib-out > /dev/null; "
                   "mkdir -p repo/standards && cp -r " + shlex.quote(str(ROOT / "standards")) + "/. repo/standards/ "
                   "&& python -m numstd publish calib-out/NS-MATMUL-BF16@2.toml --root repo",
    "cli-export": "python -m numstd capture --standard NS-SOFTMAX-BF16 --backend numpy --quick --out a.parquet "
                  "> /dev/null; python -m numstd export a.parquet --out a.safetensors",
    # a fixed --secret-seed: grade draws a fresh secret per run by default, which would change the
    # page on every regeneration (the worst quantile moves with the draws)
    "cli-grade": "python -m numstd grade --problem problem.py --candidate faithful.py --secret-seed 1",
    "cli-review": "python -m numstd grade --problem problem.py --candidate faithful.py --secret-seed 1 --json "
                  "> grade.json; python -m numstd review grade.json | head -5",  # (its reproduce block has a fence of its own)
    "cli-verify": "python -m numstd verify",
    "cli-docs": "python -m numstd docs --out pages | head -3",
}


def _cli(name: str) -> Callable[[], str]:
    def run() -> str:
        cmd = CLI[name]
        with tempfile.TemporaryDirectory(prefix="numstd-doc-") as tmp:
            work = Path(tmp)
            _prepare(work)
            env = {**os.environ, "NUMSTD_PROGRESS": "0", "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
            r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True, timeout=900)
            out = (r.stdout + r.stderr).rstrip("\n")
            out = out.replace(str(work.resolve()) + "/", "").replace(str(work) + "/", "")
            out = out.replace(str(work.resolve()), ".").replace(str(work), ".").replace(str(ROOT), "<repo>")
            out = re.sub(r"\b\d+(\.\d+)? s\b", "… s", out)
        shown = cmd.replace(shlex.quote(str(ROOT)), "<repo>").replace(str(ROOT), "<repo>")
        return f"$ {shown}\n{out}" + (f"\n(exit code {r.returncode})" if r.returncode else "")

    return run


EXAMPLES: dict[str, Callable[[], str]] = {
    "use-snippet": _use_snippet,
    "reviewer-quote": _reviewer_quote,
    "layernorm-message": _layernorm_message,
    **{name: _cli(name) for name in CLI},
}


# ------------------------------------------------------------------------------ rewriting
def render(text: str) -> str:
    """``text`` with every example block replaced by its current output."""
    def block(m: re.Match) -> str:
        name = m["name"]
        if name not in EXAMPLES:
            raise SystemExit(f"unknown example {name!r}; known: {', '.join(EXAMPLES)}")
        body = EXAMPLES[name]().rstrip("\n")
        return f"<!-- example: {name} -->\n```{m['lang']}\n{body}\n```\n"

    return MARKER.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", default=list(FILES), help=f"files to regenerate (default: {', '.join(FILES)})")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block is stale")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    stale = []
    for rel in args.files:
        path = ROOT / rel
        old = path.read_text(encoding="utf-8")
        new = render(old)
        if new != old:
            stale.append(rel)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if stale:
        print(("stale: " if args.check else "rewrote: ") + ", ".join(stale) +
              (" (python scripts/doc_examples.py regenerates them)" if args.check else ""))
    return 1 if (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
