"""python -m numstd report: reads what the plugin and grade --json write; Markdown, HTML, plots."""

import json
from pathlib import Path

import numpy as np
import pytest

from numstd.cli import main
from numstd.core.errors import NumstdError
from numstd.distribution import DistributionAccumulator
from numstd.report import load_verdicts, render_markdown, write_report
from numstd.verdict import CriterionResult, Offender, Verdict

PNG = b"\x89PNG\r\n\x1a\n"


def _verdict(passed: bool, errors: np.ndarray, name: str = "bound") -> Verdict:
    """A verdict over known ULP errors (the distribution is computed, not made up)."""
    acc = DistributionAccumulator()
    ref = np.linspace(1.0, 2.0, errors.size)
    acc.add(errors, ref)
    i = int(np.argmax(np.abs(errors)))
    return Verdict(
        passed=passed, standard_id="NS-SOFTMAX-BF16@1", standard_sha256="ab" * 32, op="softmax", shape=(errors.size,),
        formats={"inputs": ["bfloat16"], "accumulate": "float32", "output": "bfloat16", "actual": "bfloat16"},
        params={"axis": 0}, criteria=(CriterionResult(name, passed, float(np.abs(errors).max()), 1.0,
                                                     "max |error|/bound <x> & 'quoted'"),),
        ulp=acc.result(), normalized_max=float(np.abs(errors).max()),
        worst=(Offender((i,), float(ref[i]) + 0.1, float(ref[i]), float(errors[i]), float(abs(errors[i])), 0.01),),
        n_elements=errors.size, n_nonfinite=0, message="made for the report test")


@pytest.fixture
def verdicts():
    rng = np.random.default_rng(0)
    return [("test_a.py::test_ok", _verdict(True, rng.uniform(-0.5, 0.5, 500))),
            ("test_a.py::test_bad", _verdict(False, rng.standard_normal(500) * 40))]


def test_markdown_and_html_from_a_plugin_json_list(tmp_path, verdicts):
    src = tmp_path / "v.json"
    src.write_text(json.dumps([dict(v.to_dict(), test=label) for label, v in verdicts]))
    assert main(["report", str(src), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "2 verdict(s): 1 pass, 1 fail" in md
    for label, v in verdicts:
        assert label in md and v.snippet() in md  # the reviewer snippet of every verdict
    assert "| bound | **FAIL** |" in md
    page = (tmp_path / "out" / "report.html").read_text()
    assert "&lt;x&gt; &amp; &#x27;quoted&#x27;" in page and "<x>" not in page  # escaped
    pngs = sorted((tmp_path / "out" / "plots").glob("*.png"))
    if pngs:  # matplotlib installed
        assert len(pngs) == 4 and all(p.read_bytes().startswith(PNG) for p in pngs)
        assert page.count("data:image/png;base64,") == 4  # self-contained HTML
        assert md.count("](plots/") == 4


def test_parquet_input_and_failed_only_plots(tmp_path, verdicts):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("matplotlib")
    table = pa.concat_tables([v.to_arrow().append_column("test", pa.array([label])) for label, v in verdicts])
    pq.write_table(table, tmp_path / "v.parquet")
    loaded = load_verdicts(tmp_path / "v.parquet")
    assert [label for label, _ in loaded] == [label for label, _ in verdicts]
    assert loaded[1][1].to_dict() == verdicts[1][1].to_dict()
    assert main(["report", str(tmp_path / "v.parquet"), "--out", str(tmp_path / "o"), "--plots", "failed"]) == 0
    assert [p.name for p in sorted((tmp_path / "o" / "plots").glob("*.png"))] == ["0001-histogram.png",
                                                                                  "0001-magnitude.png"]


def test_npz_gives_the_full_error_vs_magnitude_plot(tmp_path, verdicts):
    pytest.importorskip("matplotlib")
    src = tmp_path / "v.json"
    src.write_text(json.dumps([v.to_dict() for _, v in verdicts]))
    ref = np.linspace(0.01, 3.0, 1000)
    np.savez(tmp_path / "a.npz", actual=ref * (1 + 2.0**-8), reference=ref)
    assert main(["report", str(src), "--out", str(tmp_path / "o"), "--npz", f"1={tmp_path / 'a.npz'}"]) == 0
    md = (tmp_path / "o" / "report.md").read_text()
    assert "1,000 of 1,000 elements (from --npz)" in md  # verdict 1: every element
    assert "the 1 worst elements (x)" in md  # verdict 0: what the verdict keeps
    assert main(["report", str(src), "--out", str(tmp_path / "o"), "--npz", f"5={tmp_path / 'a.npz'}"]) == 2
    assert main(["report", str(src), "--out", str(tmp_path / "o"), "--npz", "nonsense"]) == 2


def test_single_verdict_and_grade_report_inputs(tmp_path, verdicts):
    one = tmp_path / "one.json"
    one.write_text(verdicts[1][1].to_json())
    assert [v.passed for _, v in load_verdicts(one)] == [False]
    from numstd.grade import CaseVerdict, GradeReport

    rep = GradeReport(passed=False, standard_id="NS-MODULE-BF16@1", dtype="bfloat16", device="cpu",
                      framework="torch", op=None, op_note="", trials=1, distributions=("original", "normal"),
                      seed=0, seconds=0.1,
                      cases=(CaseVerdict(0, "original", 1, "module", verdicts[0][1]),
                             CaseVerdict(0, "normal", 2, "module", verdicts[1][1])))
    g = tmp_path / "grade.json"
    g.write_text(rep.to_json())
    labels = [label for label, _ in load_verdicts(g)]
    assert labels == ["trial 0, original (module)", "trial 0, normal (module)"]
    md = render_markdown(load_verdicts(g))
    assert "trial 0, normal (module)" in md and "1 pass, 1 fail" in md


def test_bad_inputs_are_usage_errors(tmp_path):
    assert main(["report", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "x.json").write_text("{not json")
    assert main(["report", str(tmp_path / "x.json"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "y.json").write_text(json.dumps({"schema": "numstd.verdict/99"}))
    assert main(["report", str(tmp_path / "y.json"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "z.json").write_text(json.dumps([1, 2]))
    assert main(["report", str(tmp_path / "z.json"), "--out", str(tmp_path / "o")]) == 2


def test_without_plots(tmp_path, verdicts):
    paths = write_report(verdicts, tmp_path / "o", plots="none")
    assert Path(paths["markdown"]).is_file() and not (tmp_path / "o" / "plots").exists()


def _pngs(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((d / "plots").glob("*.png"))}


def test_a_plot_does_not_depend_on_the_verdicts_drawn_before_it(tmp_path, verdicts):
    # the report keeps one figure per plot kind (speed): a verdict's plots drawn after another
    # verdict's must equal those drawn on fresh figures
    pytest.importorskip("matplotlib")
    from numstd.reporting.html import _Plotter, _agg_classes

    used, fresh = _Plotter(_agg_classes()), _Plotter(_agg_classes())
    (a, va), (b, vb) = verdicts[1], verdicts[0]  # the failing one (wide errors, more bins) first
    used.histogram(va, a, tmp_path / "ah.png")
    used.magnitude(va, a, tmp_path / "am.png", None)
    for p, name in ((used, "used"), (fresh, "fresh")):
        p.histogram(vb, b, tmp_path / f"{name}-h.png")
        p.magnitude(vb, b, tmp_path / f"{name}-m.png", None)
    for kind in ("h", "m"):
        assert (tmp_path / f"used-{kind}.png").read_bytes() == (tmp_path / f"fresh-{kind}.png").read_bytes()
    assert (tmp_path / "ah.png").read_bytes() != (tmp_path / "used-h.png").read_bytes()


def test_plots_drawn_by_a_process_pool_equal_the_serial_ones(tmp_path):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(1)
    many = [(f"v{i}", _verdict(i % 3 != 0, rng.standard_normal(300) * (1 + 10 * (i % 4)))) for i in range(20)]
    serial = write_report(many, tmp_path / "serial", workers=1)
    pooled = write_report(many, tmp_path / "pooled", workers=2)  # 20 verdicts: two tasks of ≤ 16
    assert len(serial["plots"]) == len(pooled["plots"]) == 40
    assert _pngs(tmp_path / "serial") == _pngs(tmp_path / "pooled")
    for name in ("report.md", "report.html"):
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "pooled" / name).read_bytes()
    with pytest.raises(NumstdError):
        write_report(many, tmp_path / "x", workers=0)


def test_spawned_plot_workers_draw_the_same_plots(tmp_path, monkeypatch):
    # (macOS, Windows and processes with threads start the workers by spawning, not forking)
    pytest.importorskip("matplotlib")
    import multiprocessing

    from numstd.reporting import html

    rng = np.random.default_rng(2)
    many = [(f"v{i}", _verdict(i % 2 == 0, rng.standard_normal(200) * (1 + i))) for i in range(17)]
    write_report(many, tmp_path / "serial", workers=1)
    monkeypatch.setattr(html, "_mp_context", lambda: multiprocessing.get_context("spawn"))
    write_report(many, tmp_path / "spawned", workers=2)
    assert _pngs(tmp_path / "spawned") == _pngs(tmp_path / "serial")


def test_reports_written_from_two_threads_share_no_figure(tmp_path, verdicts):
    # (docs/grading.md §4: the report code shares no mutable state; the kept figures are per report)
    pytest.importorskip("matplotlib")
    from concurrent.futures import ThreadPoolExecutor

    write_report(verdicts, tmp_path / "alone", workers=1)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda k: write_report(verdicts, tmp_path / f"t{k}", workers=1), range(4)))
    for k in range(4):
        assert _pngs(tmp_path / f"t{k}") == _pngs(tmp_path / "alone")


def test_histogram_bars_start_below_one_element_on_a_labelled_log_axis(verdicts, tmp_path):
    pytest.importorskip("matplotlib")
    from numstd.reporting.html import _Plotter, _agg_classes

    plotter = _Plotter(_agg_classes())
    v = verdicts[1][1]
    plotter.histogram(v, "t", tmp_path / "h.png")
    ax = plotter.hist_ax
    counts = [c for c in v.ulp.histogram["counts"] if c > 0]
    assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()
    low, high = ax.get_ylim()
    assert low < 1 <= min(counts) and high > max(counts)  # every bar drawn from the same floor
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{c:,}" for c in counts)  # each bar labelled
    plotter.magnitude(v, "t", tmp_path / "m.png", None)
    legend = [t.get_text() for t in plotter.mag_ax.get_legend().get_texts()]
    assert [s for s in legend if s.startswith("q")] == [f"q{q:g} = {val:.3g} ulp" for q, val in
                                                        sorted(v.ulp.quantiles.items()) if val > 0]
    assert not plotter.mag_ax.texts  # quantiles in the legend, not as labels at the lines
