"""The command line: list/show/check with the documented output and exit codes; docs are not stale."""

import json
import subprocess
import sys

import numpy as np
import pytest

from numstd.cli import main
from numstd.formats import round_to
from numstd.reference import reference


def test_list_json_has_at_least_40_standards(capsys):
    assert main(["list", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert len(items) >= 40
    for it in items:
        assert {"id", "op", "formats", "status"} <= set(it)
        assert "@" in it["id"]
    ops = {it["op"] for it in items}
    assert {"matmul", "softmax", "layer_norm", "rms_norm", "sum", "cumsum", "exp", "gelu", "attention", "cross_entropy"} <= ops


def test_show_renders_every_standard(capsys):
    from numstd.registry import list_standards

    for s in list_standards():
        assert main(["show", s.key]) == 0
        out = capsys.readouterr().out
        assert s.key in out and s.model.error.text in out and "rationale" in out and "provenance" in out


def test_check_cli_exit_codes(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    good = np.exp(x.astype(np.float64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "good.npy", good)
    np.save(tmp_path / "bad.npy", np.zeros_like(good))
    np.save(tmp_path / "obj.npy", np.array([object()], dtype=object), allow_pickle=True)
    assert main(["check", "--op", "exp", "--inputs", str(tmp_path / "x.npy"), "--actual", str(tmp_path / "good.npy")]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["check", "--op", "exp", "--inputs", str(tmp_path / "x.npy"), "--actual", str(tmp_path / "bad.npy"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["passed"] is False
    # usage errors: unknown op, pickled file (never unpickled), missing argument
    assert main(["check", "--op", "expp", "--inputs", str(tmp_path / "x.npy"), "--actual", str(tmp_path / "good.npy")]) == 2
    assert main(["check", "--op", "exp", "--inputs", str(tmp_path / "obj.npy"), "--actual", str(tmp_path / "good.npy")]) == 2
    assert "unpickling" in capsys.readouterr().err
    assert main(["check", "--op", "exp"]) == 2


def test_check_cli_params_and_standard(tmp_path, capsys):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    y = reference("softmax", [x], axis=0).values
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y.astype(np.float32))
    np.save(tmp_path / "ybf.npy", round_to(y, "bfloat16").astype(np.float32))  # bf16-accurate only
    args = ["check", "--op", "softmax", "--inputs", str(tmp_path / "x.npy"), "--param", "axis=0",
            "--standard", "NS-SOFTMAX-FP32@1", "--actual"]
    assert main(args + [str(tmp_path / "y.npy")]) == 0, capsys.readouterr()
    assert main(args + [str(tmp_path / "ybf.npy")]) == 1
    assert "NS-SOFTMAX-FP32@1" in capsys.readouterr().out


def test_module_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "numstd", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "numstd" in r.stdout


def test_generated_docs_are_not_stale():
    from importlib import resources
    from pathlib import Path

    from numstd.docs import render

    root = Path(str(resources.files("numstd.standards"))).parent / "docs" / "standards"
    if not root.is_dir():
        pytest.skip("docs/ is not shipped in the wheel; this test runs in a checkout")
    pages = render()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in root.glob("*.md")}
    assert set(on_disk) == set(pages), "run `python -m numstd docs`"
    for name, text in pages.items():
        assert on_disk[name] == text, f"docs/standards/{name} is stale: run `python -m numstd docs`"


def test_publish_of_a_missing_draft_is_a_clear_error_with_exit_2(tmp_path, capsys):
    from numstd.cli.app import main

    rc = main(["publish", str(tmp_path / "missing.toml"), "--into", str(tmp_path / "mine")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot read the draft" in err and "calibrate --out" in err
