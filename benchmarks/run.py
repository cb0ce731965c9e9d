#!/usr/bin/env python
"""Run every numstd benchmark on the embedded default (numpy backend) and publish the results.

    python benchmarks/run.py            # full run: writes results, docs/benchmarks.md and README
    python benchmarks/run.py --quick    # smaller sizes; writes benchmarks/results/quick-*.json only
                                        # (add --write-docs to publish a quick run's tables)

1. **Discrimination** (``benchmarks/discrimination/``): every corpus variant on the suite cases
   (seed 101) of every default standard, judged by numstd and by the fixed tolerances of
   torch.testing, numpy, KernelBench, JAX, NKIBench and nki-samples.
1b. **Real implementations** (``benchmarks/real_part.py``; skip with ``--skip real``): the library
   kernels (torch CPU 1 and 2 threads, inductor, jax CPU), the float64 reference rounded to the
   format (the KernelBench-layout sweep) and the real-torch bugs of ``benchmarks/real_bugs.py`` on
   every suite case of each default standard, judged by numstd and by torch.testing.assert_close,
   KernelBench's torch.allclose and np.allclose side by side (``--skip inductor`` drops the
   torch.compile kernels, which compile per shape and take most of the part's time).
2. **Speed** (``benchmarks/perf/``), each in its own subprocess with ``OPENBLAS_CORETYPE`` and
   ``OPENBLAS_L2_SIZE`` removed from the environment (they force an old BLAS kernel on this
   machine; the kernel threadpoolctl reports is recorded): ``check`` against allclose-style
   checks, a bf16 matmul ``check`` against one float64 matmul, ``check``'s peak extra memory, the
   exhaustive bf16 survey, ``calibrate --quick`` and ``grade``.

Results: ``benchmarks/results/{machine,discrimination,perf}.json`` and ``real.json.gz``; the tables go into the generated
blocks of ``docs/benchmarks.md`` and into the README's "Benchmarks" section (the last section).
Exit status 0 even when a speed target is missed (the tables say so); 2 when a benchmark crashed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "perf"))

from common import clean_env, cross_core_probe, loadavg, machine, two_core_probe  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
README_HEADING = "## Benchmarks"

#: (key, script, args full, args quick, timeout s)
PERF = [
    ("check-exp", "bench_check.py", ["--op", "exp"], ["--op", "exp", "--log2n", "22"], 600),
    ("check-softmax", "bench_check.py", ["--op", "softmax"], ["--op", "softmax", "--log2n", "22"], 600),
    ("check-matmul", "bench_matmul.py", [], ["--n", "1024"], 900),
    ("memory", "bench_memory.py", [], ["--log2n", "22"], 600),
    ("survey", "bench_survey.py", ["--repeats", "15"], ["--repeats", "5"], 300),
    ("calibrate", "bench_calibrate.py", ["--repeats", "5"], ["--repeats", "1", "--no-warmup"], 1200),
    ("grade", "bench_grade.py", [], ["--repeats", "5"], 600),
]


def _cpu_busy_s() -> float | None:
    """CPU seconds all processes have spent busy (``/proc/stat``: user+nice+system+irq+softirq+steal)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    except (OSError, ValueError):
        return None
    import os

    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_perf(quick: bool, only: set[str] | None = None) -> dict[str, dict]:
    """Each speed benchmark in a subprocess (clean OPENBLAS env); its last JSON line, or an error."""
    out: dict[str, dict] = {}
    for key, script, full_args, quick_args, timeout in PERF:
        if only and key not in only:
            continue
        cmd = [sys.executable, str(ROOT / "benchmarks" / "perf" / script)] + (quick_args if quick else full_args)
        print(f"[perf] {key}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        probe = two_core_probe()  # how much of two cores the machine gives just now
        xcore = cross_core_probe()  # and what handing data to the other core costs
        t = time.perf_counter()
        load_before, busy0, mine0 = loadavg(), _cpu_busy_s(), _children_cpu_s()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            out[key] = {"error": f"timed out after {timeout} s"}
            continue
        lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
        if not lines:
            out[key] = {"error": f"exit {proc.returncode}, no JSON line; stderr: {proc.stderr.strip()[-500:]}"}
            continue
        res = json.loads(lines[-1])
        wall = time.perf_counter() - t
        res["wall_s"] = round(wall, 1)
        res["loadavg_before"], res["loadavg_after"] = load_before, loadavg()
        res["two_core_probe"] = probe
        res["cross_core_probe"] = {"before": xcore, "after": cross_core_probe()}
        busy1 = _cpu_busy_s()
        if busy0 is not None and busy1 is not None and wall > 0:
            # cores kept busy by other processes while this benchmark ran (0 on a quiet machine)
            res["other_cores_busy"] = round(max(0.0, (busy1 - busy0) - (_children_cpu_s() - mine0)) / wall, 2)
        out[key] = res
    return out


# ------------------------------------------------------------------------------------- tables
def _load_real(path: Path) -> dict:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def run_real(quick: bool, inductor: bool, prefix: str, date: str, command: str,
             reuse_kernels: bool = False) -> dict[str, str]:
    """The real-implementations part (benchmarks/real_part.py): results to ``{prefix}real.json.gz``, and
    the generated blocks of docs/benchmarks.md section 1b.  With ``reuse_kernels`` (``--skip
    real-kernels``) the kernel rows of the last run are kept and only the bugs and controls run."""
    from benchmarks import real_part

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    reuse = None
    if reuse_kernels:
        reuse = _load_real(RESULTS / f"{prefix}real.json.gz")
        if "run" not in reuse["meta"]:  # results written before the meta recorded its run
            head = reuse.get("markdown", {}).get("real-meta", "")
            reuse["meta"]["run"] = head[len("Run "):head.index("`:") + 1] if head.startswith("Run ") else "an earlier run"
    result = real_part.run(quick=quick, inductor=inductor, reuse=reuse,
                           progress=lambda m: print(m, file=sys.stderr, flush=True))
    md = real_part.markdown(result, date=date, commit=commit, command=command)
    result["markdown"] = md
    import gzip

    with gzip.open(RESULTS / f"{prefix}real.json.gz", "wt", encoding="utf-8") as fh:  # ~15k rows: 5 MB plain
        json.dump(result, fh, separators=(",", ":"), default=float)
    print(md["real-side-by-side"], md["real-impls"], sep="\n\n")
    return md


def _ok(flag: bool | None) -> str:
    return "–" if flag is None else ("✅ met" if flag else "❌ missed")


def _ratio(median: float, best: float | None) -> str:
    """``median×`` and, when known, the ratio of the fastest runs (less sensitive to other load)."""
    return f"{median:.2f}×" + (f" (min {best:.2f}×)" if best is not None else "")


def _met(median: float, best: float | None, target: float) -> bool:
    """A ratio target is met when the median ratio *and* the ratio of the fastest runs meet it: on a
    shared machine other load can slow either side, and the fastest runs are the least disturbed."""
    return median <= target and (best is None or best <= target)


def perf_rows(perf: dict[str, dict]) -> list[dict]:
    """One row per measured figure: what, measured, baseline, value, target, met."""
    rows: list[dict] = []

    def add(key: str, row: dict) -> None:
        row["other"] = perf[key].get("other_cores_busy")
        row["probe"] = (perf[key].get("two_core_probe") or {}).get("efficiency")
        x = perf[key].get("cross_core_probe") or {}
        row["xcore"] = [x[k]["ratio"] for k in ("before", "after") if k in x]
        rows.append(row)

    def err(key: str) -> bool:
        if key not in perf:
            return True
        if "error" in perf[key]:
            rows.append({"what": key, "measured": "error", "baseline": perf[key]["error"], "value": "–",
                         "target": "–", "met": None})
            return True
        return False

    for key, op in (("check-exp", "exp"), ("check-softmax", "softmax")):
        if err(key):
            continue
        r = perf[key]
        n = f"2^{int(r['elements']).bit_length() - 1}"
        shape = "" if op == "exp" else f", rows of {r['shape'][-1]}"
        add(key, {"what": f"`check` {op}, {n} fp32{shape} vs float64 ref + `np.allclose`",
                     "measured": f"{r['check_s']:.3f} s", "baseline": f"{r['numpy_s']:.3f} s",
                     "value": _ratio(r["ratio_vs_numpy"], r.get("ratio_vs_numpy_min")), "target": "≤ 1.0×",
                     "met": _met(r["ratio_vs_numpy"], r.get("ratio_vs_numpy_min"), r["target_ratio"]),
                     "profile": r.get("profile_check"),
                     "stages": r.get("stages_check")})
        if r.get("ratio_vs_torch") is not None:
            add(key, {"what": f"`check` {op}, {n} fp32{shape} vs `torch.testing.assert_close` "
                                 f"({r.get('torch_threads')} threads)",
                         "measured": f"{r['check_s']:.3f} s", "baseline": f"{r['torch_s']:.3f} s",
                         "value": _ratio(r["ratio_vs_torch"], r.get("ratio_vs_torch_min")), "target": "≤ 1.0×",
                         "met": _met(r["ratio_vs_torch"], r.get("ratio_vs_torch_min"), r["target_ratio"])})
    if not err("check-matmul"):
        r = perf["check-matmul"]
        n = r["shape"][0]
        add("check-matmul", {"what": f"`check` bf16 matmul {n}³ vs one float64 `np.matmul`",
                             "measured": f"{r['check_s']:.2f} s",
                     "baseline": f"{r['float64_matmul_s']:.3f} s", "value": _ratio(r["ratio"], r.get("ratio_min")),
                     "target": "≤ 2.5×", "met": _met(r["ratio"], r.get("ratio_min"), r["target_ratio"]),
                     "profile": r.get("profile_check"),
                     "stages": r.get("stages_check")})
    if not err("memory"):
        r = perf["memory"]
        rss = f"; RSS {r['rss_fraction']:.2f}" if r.get("rss_fraction") is not None else ""
        add("memory", {"what": f"peak extra memory of `check`, exp 2^{int(r['elements']).bit_length() - 1} fp32 "
                             f"(tracemalloc + blocks the allocator pool kept{rss and '; RSS in ()'})",
                     "measured": f"{(r['tracemalloc_peak_bytes'] + r.get('pool_peak_bytes', 0)) / 2**20:.1f} MiB",
                     "baseline": f"{r['input_bytes'] / 2**20:.0f} MiB input",
                     "value": f"{r['fraction']:.2f}" + (f" ({r['rss_fraction']:.2f})" if rss else ""),
                     "target": "≤ 0.25", "met": r["ok"]})
    if not err("survey"):
        r = perf["survey"]
        add("survey", {"what": f"exhaustive {r['format']} survey of `{r['op']}` ({r['n']:,} inputs)",
                     "measured": f"{r['median_s']:.3f} s", "baseline": "–", "value": f"{r['median_s']:.3f} s",
                     "target": "< 0.2 s", "met": r["ok"]})
    if not err("calibrate"):
        r = perf["calibrate"]
        failed = sum(1 for c in r.get("exit_codes", []) if c)
        note = f"; {failed} of {len(r['exit_codes'])} runs failed" if failed else ""
        add("calibrate", {"what": "`python -m numstd calibrate --op matmul --inputs bfloat16 --quick` (wall"
                                  f"{note})", "measured": f"{r['median_s']:.1f} s", "baseline": "–",
                          "value": f"{r['median_s']:.1f} s", "target": "< 60 s", "met": r["ok"]})
    if not err("grade"):
        r = perf["grade"]
        add("grade", {"what": f"`grade` of `tests/problems/{r['problem']}` ({r['cases']} cases, after import; "
                             f"1 torch thread)", "measured": f"{r['median_s_one_thread']:.3f} s", "baseline": "–",
                     "value": f"{r['median_s_one_thread']:.3f} s", "target": "< 1 s",
                     "met": r["median_s_one_thread"] < r["target_s"]})
    return rows


def perf_table(rows: list[dict]) -> str:
    lines = ["| benchmark | numstd | baseline | ratio / value | target | | other load | 2 cores | cross-core |",
             "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        other = "–" if r.get("other") is None else f"{r['other']:.2f}"
        probe = "–" if r.get("probe") is None else f"{r['probe']:.2f}"
        xcore = " / ".join(f"{v:.1f}" for v in r.get("xcore") or []) or "–"
        lines.append(f"| {r['what']} | {r['measured']} | {r['baseline']} | {r['value']} | {r['target']} | "
                     f"{_ok(r['met'])} | {other} | {probe} | {xcore} |")
    return "\n".join(lines)


def profile_notes(rows: list[dict]) -> str:
    """For each profiled benchmark: the share of each step of ``check`` and the functions with the
    largest own time."""
    out = []
    for r in rows:
        if r.get("profile"):
            stages = r.get("stages") or {}
            steps = "; ".join(f"{k} {100 * v['share']:.0f} %" for k, v in stages.items() if not k.startswith("total"))
            top = "; ".join(f"`{p['function']}` {100 * p['share']:.0f} %" for p in r["profile"][:4])
            out.append(f"- {r['what']}: " + (f"steps: {steps}. " if steps else "") + f"Largest own time: {top}")
    return "\n".join(out) if out else "(no profile recorded)"


def machine_block(m: dict, perf: dict[str, dict]) -> str:
    blas = next((b for p in perf.values() for b in p.get("blas", []) if b.get("user_api") == "blas"), None) \
        if perf else None
    blas = blas or next((b for b in m.get("blas", []) if b.get("user_api") == "blas"), None)
    blas_txt = (f"{blas['internal_api']} {blas['version']}, kernel {blas['architecture']}, "
                f"{blas['num_threads']} threads"
                if blas else "not reported (threadpoolctl not installed)")
    env = ", ".join(f"{k}={v}" for k, v in sorted(m.get("openblas_env", {}).items())) or "none"
    other = [p["other_cores_busy"] for p in perf.values() if p.get("other_cores_busy") is not None]
    load_txt = (f"- Cores kept busy by *other* processes during the speed benchmarks (from /proc/stat, minus the "
                f"benchmark's own CPU time): {min(other):.1f}–{max(other):.1f} of {m['usable_cores']} "
                "(column `other load` below; where it is high the timings are pessimistic)") if other else ""
    return "\n".join(filter(None, [
        f"- CPU: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gib']} GiB memory",
        f"- {m['platform']}, Python {m['python']}",
        f"- numpy {m['numpy']}, ml_dtypes {m['ml_dtypes']}, torch {m['torch'] or 'not installed'}, "
        f"jax {m['jax'] or 'not installed'}, numstd {m['numstd']}",
        f"- BLAS in the speed benchmarks (threadpoolctl): {blas_txt}; OPENBLAS_* in the parent environment: "
        f"{env} (removed in each speed benchmark's subprocess)",
        load_txt,
    ]))


# ------------------------------------------------------------------------------------- writing
def replace_block(text: str, name: str, body: str) -> str:
    """Replace ``<!-- BEGIN GENERATED: name -->…<!-- END GENERATED: name -->`` in ``text``.

    Raises
    ------
    KeyError
        When the markers are missing.
    """
    tag = re.escape(name)
    pat = re.compile(rf"(<!-- BEGIN GENERATED: {tag} -->\n).*?(\n<!-- END GENERATED: {tag} -->)", re.S)
    if not pat.search(text):
        raise KeyError(f"markers for generated block {name!r} not found")
    return pat.sub(lambda mm: mm.group(1) + body.strip("\n") + mm.group(2), text)


def readme_section(headline: str, perf_rows_: list[dict], summary: str, date: str) -> str:
    short = [r for r in perf_rows_ if "profile" in r or "survey" in r["what"] or "calibrate" in r["what"]
             or "grade" in r["what"] or "memory" in r["what"]]
    return "\n".join([
        README_HEADING, "",
        "Measured by `python benchmarks/run.py` on the embedded default (numpy backend, 2-core CPU) on "
        f"{date}; details, method and every numstd miss or false reject in [docs/benchmarks.md](docs/benchmarks.md).",
        "",
        "**Discrimination**: every variant of `numstd.corpus` on the suite cases of every default standard "
        "(seed 101, which calibration never used), judged by numstd and by the fixed tolerances graders use: "
        + summary[0].lower() + summary[1:], "",
        headline, "",
        "**Speed** (medians of ≥ 5 runs after a warm-up; a ratio target counts as met only when the ratio "
        "of the fastest runs meets it too; *other load*: cores kept busy by other processes meanwhile; "
        "*2 cores*: the share of two cores the machine gave a two-thread probe just before, 1.00 = all; "
        "*cross-core*: the cost of reading what the other core wrote, relative to reading one's own, "
        "before / after — about 1.1 when the cores share a cache, about 2.3 when not):", "",
        perf_table(short), "",
    ])


def write_readme(section: str) -> None:
    text = README.read_text(encoding="utf-8")
    i = text.find("\n" + README_HEADING + "\n")
    base = text if i < 0 else text[: i + 1]
    README.write_text(base.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes; results to benchmarks/results/quick-*.json")
    p.add_argument("--write-docs", action="store_true", help="with --quick: still write docs and README")
    p.add_argument("--jobs", type=int, default=None, help="discrimination worker processes")
    p.add_argument("--skip", default="", help="comma-separated parts to skip: discrimination, real, inductor "
                   "(the torch.compile kernels of the real part), real-kernels (keep the last run's kernel rows, "
                   "rerun the real part's bugs and controls), perf")
    p.add_argument("--perf", default="", help="comma-separated speed benchmarks to run (default all)")
    args = p.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    prefix = "quick-" if args.quick else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    date = _dt.date.today().isoformat()

    mach = machine()
    (RESULTS / f"{prefix}machine.json").write_text(json.dumps(mach, indent=1), encoding="utf-8")
    blocks: dict[str, str] = {}
    crashed = False
    md = None
    if "discrimination" not in skip:
        from benchmarks.discrimination.benchmark import markdown, run

        from numstd.progress import counter

        bar = counter("discrimination", "case")  # (a tqdm bar on stderr when it is a terminal)
        sc, result = run(quick=args.quick, jobs=args.jobs, progress=lambda i, n, unit: bar(i, n))
        result["meta"]["date"] = date
        md = markdown(sc, result["meta"])
        result["markdown"] = md
        (RESULTS / f"{prefix}discrimination.json").write_text(
            json.dumps(result, separators=(",", ":"), default=float), encoding="utf-8")
        print(md["summary"], md["headline"], md["findings"], sep="\n\n")
        blocks.update({"discrimination-summary": md["summary"], "discrimination-headline": md["headline"],
                       "discrimination-families": md["families"], "discrimination-ops": md["ops"],
                       "discrimination-findings": md["findings"]})
    elif (RESULTS / f"{prefix}discrimination.json").is_file():  # reuse the last run's tables
        md = json.loads((RESULTS / f"{prefix}discrimination.json").read_text(encoding="utf-8")).get("markdown")
    if "real" not in skip:
        command = "python benchmarks/run.py " + " ".join(sys.argv[1:] if argv is None else argv)
        blocks.update(run_real(args.quick, "inductor" not in skip, prefix, date, command.strip(),
                               reuse_kernels="real-kernels" in skip))
    elif (RESULTS / f"{prefix}real.json.gz").is_file():  # reuse the last run's tables
        blocks.update(_load_real(RESULTS / f"{prefix}real.json.gz").get("markdown", {}))
    perf: dict[str, dict] = {}
    rows: list[dict] = []
    if "perf" in skip and (RESULTS / f"{prefix}perf.json").is_file():
        perf = json.loads((RESULTS / f"{prefix}perf.json").read_text(encoding="utf-8"))["results"]
        rows = perf_rows(perf)
    if "perf" not in skip:
        only = set(filter(None, args.perf.split(","))) or None
        perf = run_perf(args.quick, only)
        crashed = any("error" in r for r in perf.values())
        old = RESULTS / f"{prefix}perf.json"
        if only and old.is_file():  # a partial rerun keeps the other benchmarks' last results
            perf = dict(json.loads(old.read_text(encoding="utf-8"))["results"], **perf)
        (RESULTS / f"{prefix}perf.json").write_text(json.dumps({"date": date, "quick": args.quick, "results": perf},
                                                               indent=1, default=float), encoding="utf-8")
        rows = perf_rows(perf)
        print(perf_table(rows))
    if rows:
        blocks.update({"perf": perf_table(rows), "perf-profiles": profile_notes(rows)})
    reran = not {"discrimination", "perf"} <= skip  # a run of the real part alone keeps machine and README
    if reran:
        blocks["machine"] = machine_block(mach, perf) + f"\n- Run: {date}, `python benchmarks/run.py" \
            + (" --quick" if args.quick else "") + "`"
    if args.quick and not args.write_docs:
        print(f"quick run: results in {RESULTS}/quick-*.json (docs not written; add --write-docs)", file=sys.stderr)
        return 2 if crashed else 0
    text = DOC.read_text(encoding="utf-8")
    for name, body in blocks.items():
        text = replace_block(text, name, body)
    DOC.write_text(text, encoding="utf-8")
    if md is not None and rows and reran:
        write_readme(readme_section(md["headline"], rows, md["summary"], date))
    print(f"wrote {DOC.relative_to(ROOT)}" + (f" and the README's {README_HEADING!r} section" if reran else ""),
          file=sys.stderr)
    return 2 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
