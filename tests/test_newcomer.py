"""Tests of what a newcomer meets first (issue 22): the smaller items.

Independent truths: mpmath at 60 digits for the survey's largest error, a problem file that
raises exactly what ``import torch`` raises without torch, a copy of the package laid out as a
wheel installs it, numpy's own warning machinery (``warnings`` as errors), progress adapters
against a counting stand-in.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest


def test_survey_summary_max_agrees_with_its_histogram_and_with_mpmath():
    # exp in bfloat16 on the numpy backend (float32 exp rounded to bf16): the largest error is
    # just above 0.5 ulp; the summary must not print it as 0.5 beside a (0.5, 1] bin
    mpmath = pytest.importorskip("mpmath")
    from numstd.survey import survey

    s = survey("exp", "bfloat16")
    ok = np.isfinite(s.outputs) & np.isfinite(s.inputs)
    ctx = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.MPContext()
    ctx.prec = 200
    errs = []
    for x, y in zip(s.inputs[ok], s.outputs[ok]):
        r = ctx.exp(ctx.mpf(float(x)))
        if not ctx.isfinite(r) or r == 0 or r > 3.3895313892515355e38:
            continue
        e = max(int(ctx.floor(ctx.log(abs(r), 2))), -126)
        ulp = ctx.ldexp(1, e - 7)  # bfloat16: p = 8
        errs.append(float(abs((ctx.mpf(float(y)) - r) / ulp)))
    errs = np.array(errs)
    line = next(x for x in s.summary().splitlines() if "max |ULP error|" in x)
    printed = float(line.split()[-1])
    assert errs.max() > 0.5  # (the case this test is about)
    assert printed > 0.5 and math.isclose(printed, errs.max(), rel_tol=1e-4)
    edges, counts = s.ulp.histogram["edges"], s.ulp.histogram["counts"]
    above = int(np.sum((errs > 0.5) & (errs <= 1.0)))
    assert counts[edges.index(0.5)] == above


def test_show_says_every_element_for_a_zero_fraction():
    from numstd.authoring.docs import render_standard
    from numstd.registry import get_standard

    text = render_standard(get_standard("NS-EXP-BF16@1"))
    assert "a fraction 0 " not in text
    assert "bound: |a_i − r_i| ≤ B_i for every element" in text


def test_formula_path_without_native_warns_nothing_and_agrees(monkeypatch):
    # layer_norm with eps = 0 on a constant row: sigma = 0, an infinite bound term on both paths
    from numstd.check import check

    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 64)).astype(np.float32)
    x[0] = 3.0
    w, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    m, v = x.astype(np.float64).mean(-1, keepdims=True), x.astype(np.float64).var(-1, keepdims=True)
    with np.errstate(all="ignore"):
        y = ((x - m) / np.sqrt(v) * w + b).astype(np.float32)
    verdicts = []
    for native in ("0", "1"):
        monkeypatch.setenv("NUMSTD_NATIVE", native)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            verdicts.append(check(y, op="layer_norm", inputs=[x, w, b], eps=0.0))
    assert verdicts[0].passed == verdicts[1].passed
    assert [c.value for c in verdicts[0].criteria] == [c.value for c in verdicts[1].criteria]


def test_grade_without_torch_says_how_to_install_it(tmp_path, capsys):
    from numstd.cli import main

    prob = tmp_path / "problem.py"
    prob.write_text('raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n')
    cand = tmp_path / "cand.py"
    cand.write_text("ModelNew = None\n")
    assert main(["grade", "--problem", str(prob), "--candidate", str(cand)]) == 2
    err = capsys.readouterr().err
    assert "pip install torch" in err and "numstd[torch]" in err


def test_docs_outside_a_checkout_asks_for_out(tmp_path):
    # numstd laid out as a wheel installs it: the package with its standards inside, no repository
    import shutil

    import numstd

    site = tmp_path / "site-packages"
    pkg = site / "numstd"
    shutil.copytree(numstd.__path__[0], pkg, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "reference_data", "*.so"))
    from importlib import resources

    if not (pkg / "standards").is_dir():  # a source checkout maps the data package to the repo's standards/
        shutil.copytree(str(resources.files("numstd.standards")), pkg / "standards")
    code = "import sys; from numstd.cli import main; sys.exit(main(['docs']))"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(site), "NUMSTD_NATIVE": "0", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2, r.stderr
    assert "pass --out DIR" in r.stderr
    assert not (pkg / "docs").exists() and not (site / "docs").exists()
    r = subprocess.run([sys.executable, "-c", code.replace("['docs']", "['docs', '--out', 'pages']")], cwd=tmp_path,
                       capture_output=True, text=True, env={"PYTHONPATH": str(site), "NUMSTD_NATIVE": "0",
                                                            "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "pages" / "README.md").is_file()


def test_progress_bars_are_off_without_a_terminal_and_count_when_forced(monkeypatch, capsys):
    pytest.importorskip("tqdm")
    from numstd import progress

    monkeypatch.delenv("NUMSTD_PROGRESS", raising=False)
    assert not progress.enabled()  # (pytest captures stderr: not a terminal)
    show = progress.counter("t", "task")
    for i in range(1, 6):
        show(i, 5)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("NUMSTD_PROGRESS", "1")
    assert list(progress.iterate(range(7), "it")) == list(range(7))
    show = progress.counter("calibrate", "task")
    for i in (0, 3, 5):
        show(i, 5)
    stages = progress.stages("survey exp")
    stages("reference", 0.5)
    stages("judge", 1.0)
    err = capsys.readouterr().err
    assert err.count("\r") >= 6  # (drawn and cleared: leave=False)
    assert "it:" in err and "0/7" in err and "calibrate:" in err and "/5" in err and "survey exp" in err


def test_grade_takes_its_inputs_from_a_tensor_file(tmp_path):
    # the problem's Model on inputs read from a safetensors file: a faithful candidate passes and
    # returning zeros fails, on exactly those inputs (the "original" draw)
    pytest.importorskip("torch")
    from pathlib import Path

    from numstd.grade_cli import grade_files
    from numstd.tensorio import save

    here = Path(__file__).parent / "problems" / "softmax"
    x = np.random.default_rng(0).normal(size=(8, 256)).astype(np.float32)
    save(tmp_path / "in.safetensors", {"0": x})
    good = grade_files(here / "problem.py", here / "faithful.py", inputs=tmp_path / "in.safetensors", trials=1)
    bad = grade_files(here / "problem.py", here / "zeros.py", inputs=tmp_path / "in.safetensors", trials=1)
    assert good.passed and not bad.passed
    original = [c for c in good.cases if c.distribution == "original"]
    assert original and all(tuple(c.verdict.shape) == x.shape for c in original)
