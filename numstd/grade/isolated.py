"""A candidate module run in its own process: :func:`numstd.grade` without trusting the candidate.

:class:`IsolatedCandidate` stands for a KernelBench ``ModelNew`` defined in a file.  The grader
never executes that file: a child Python process (``python -m numstd.grade.isolated``) loads it,
builds ``ModelNew(*init_inputs)`` under the same torch seed as the reference, loads the
reference's weights when the state_dict names and shapes match, and runs ``forward`` on the inputs
it is sent.  The child never sees the secret seed, the truth or the reference's outputs, cannot
patch numstd in the grader's memory, and a crash or a hang (``timeout_s`` per call) is a failing
case with its reason, never a crashed grader.

Data crosses the process boundary as raw bytes: each tensor is a file of its bytes plus a JSON
header (dtype name, shape); integers, floats, booleans and None as JSON.  Nothing is pickled in
either direction, so no data coming back from the candidate is ever unpickled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

__all__ = ["IsolatedCandidate", "CandidateCrashed"]

_DTYPES = ("float64", "float32", "bfloat16", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


#: seconds allowed for the child to start (import torch) and build ModelNew, at least
BUILD_TIMEOUT_S = 300.0


class CandidateCrashed(RuntimeError):
    """The candidate's process died, hung past its time limit, or answered nonsense."""


def _write(values: Sequence[Any], folder: Path) -> list:
    """Headers for ``values`` (tensors written as ``<i>.bin`` raw bytes under ``folder``)."""
    import torch

    heads = []
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            name = str(v.dtype).replace("torch.", "")
            if name not in _DTYPES:
                raise TypeError(f"tensor dtype {name} cannot cross to the isolated candidate")
            t = v.detach().to("cpu").contiguous()
            flat = t.reshape(-1)
            raw = flat.view(torch.uint8) if t.dtype != torch.bool else flat.to(torch.uint8)
            (folder / f"{i}.bin").write_bytes(raw.numpy().tobytes())
            heads.append({"tensor": name, "shape": list(t.shape), "file": f"{i}.bin"})
        elif v is None or isinstance(v, (bool, int, float, str)):
            heads.append({"json": v})
        elif isinstance(v, (list, tuple)) and all(x is None or isinstance(x, (bool, int, float, str)) for x in v):
            heads.append({"json": list(v)})
        else:
            raise TypeError(f"{type(v).__name__} cannot cross to the isolated candidate (tensors and JSON values only)")
    return heads


def _read(heads: Sequence[dict], folder: Path, device: str = "cpu") -> list:
    """The values ``heads`` describe (tensors from raw bytes: no unpickling)."""
    import numpy as np
    import torch

    out = []
    for h in heads:
        if "tensor" in h:
            name = h["tensor"]
            if name not in _DTYPES or not isinstance(h.get("file"), str) or "/" in h["file"]:
                raise CandidateCrashed(f"the candidate process sent an invalid tensor header {h!r}")
            raw = np.frombuffer((folder / h["file"]).read_bytes(), dtype=np.uint8).copy()
            dt = getattr(torch, name)
            t = torch.from_numpy(raw)
            t = t.to(torch.bool) if dt == torch.bool else t.view(dt)
            out.append(t.reshape([int(d) for d in h["shape"]]).to(device))
        else:
            out.append(h.get("json"))
    return out


class IsolatedCandidate:
    """A callable ``ModelNew`` living in a child process (module docstring).

    Parameters
    ----------
    path : path of the candidate file (defines ``ModelNew``)
    timeout_s : float
        Seconds allowed for each forward call (building the model: at least :data:`BUILD_TIMEOUT_S`).
    """

    isolation = "subprocess"

    def __init__(self, path: str | os.PathLike, *, timeout_s: float = 120.0) -> None:
        self.path = str(Path(path).resolve())
        self.timeout_s = float(timeout_s)
        self.last_mutated: list[int] = []
        self._proc: subprocess.Popen | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="numstd-isolated-")
        self._n = 0
        self._dead = ""
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ parent side
    def bind(self, reference: Any, adapter: Any, fmt: Any, init: Sequence[Any], init_seed: int) -> None:
        """Start the child: build ``ModelNew(*init)`` seeded like the reference, with its weights."""
        import torch

        self.close()
        self._dead = ""
        folder = Path(self._dir.name) / f"init{self._n}"
        self._n += 1
        folder.mkdir()
        weights = {}
        if isinstance(reference, torch.nn.Module):
            sd = reference.state_dict()
            keys = sorted(sd)
            weights = {"keys": keys, "values": _write([sd[k] for k in keys], folder)}
        spec = {"path": self.path, "init": _write(list(init), folder), "seed": int(init_seed),
                "dtype": fmt.name, "device": str(adapter.dev), "weights": weights, "dir": str(folder)}
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
        self._proc = subprocess.Popen([sys.executable, "-m", "numstd.grade.isolated"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                      cwd=self._dir.name)
        self._ask({"build": spec}, timeout=max(self.timeout_s, BUILD_TIMEOUT_S))

    def _ask(self, msg: dict, timeout: float | None = None) -> dict:
        if self._dead:
            raise CandidateCrashed(self._dead)
        assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
        reply: list = []

        def read() -> None:
            reply.append(self._proc.stdout.readline())

        try:
            self._proc.stdin.write(json.dumps(msg) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        limit = self.timeout_s if timeout is None else timeout
        reader.join(limit)
        if reader.is_alive() or not reply or not reply[0]:
            hung = reader.is_alive()
            self.close()
            err = ""
            if not hung and self._proc.stderr is not None:
                err = self._proc.stderr.read()[-800:]
            self._dead = (f"the candidate process exceeded its time limit of {limit:g} s" if hung else
                          f"the candidate process died (exit {self._proc.returncode}): {err.strip()}")
            raise CandidateCrashed(self._dead)
        try:
            ans = json.loads(reply[0])
        except json.JSONDecodeError:
            raise CandidateCrashed("the candidate process wrote to stdout instead of answering; print to stderr") from None
        if "error" in ans:
            raise RuntimeError(ans["error"])
        return ans

    def __call__(self, *inputs: Any) -> Any:
        import torch

        with self._lock:
            self._n += 1
            folder = Path(self._dir.name) / f"call{self._n}"
            folder.mkdir()
            ans = self._ask({"call": {"dir": str(folder), "inputs": _write(list(inputs), folder)}})
            self.last_mutated = [int(i) for i in ans.get("mutated", [])]
            dev = inputs[0].device if inputs and isinstance(inputs[0], torch.Tensor) else "cpu"
            out = _read(ans["outputs"], folder, str(dev))
            for f in folder.iterdir():
                f.unlink()
            folder.rmdir()
            return out[0] if ans.get("single") else tuple(out)

    def close(self) -> None:
        """Stop the child process (idempotent)."""
        p = self._proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def __del__(self) -> None:
        try:
            self.close()
            self._dir.cleanup()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ------------------------------------------------------------------ child side
def _bits(t: Any) -> bytes:
    """The raw bytes of a tensor (bitwise: NaN equals NaN, −0 differs from +0)."""
    import torch

    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return (flat.to(torch.uint8) if t.dtype == torch.bool else flat.view(_int_of(t))).numpy().tobytes()


def _int_of(t: Any) -> Any:
    import torch

    return {2: torch.int16, 4: torch.int32, 8: torch.int64, 1: torch.uint8}[t.element_size()]


def _serve() -> int:
    """The child's loop: one JSON request per stdin line, one JSON answer per stdout line."""
    import importlib.util

    import torch

    out = sys.stdout
    sys.stdout = sys.stderr  # the candidate's prints must not corrupt the protocol
    model = None
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            if "build" in msg:
                b = msg["build"]
                spec = importlib.util.spec_from_file_location("numstd_isolated_candidate", b["path"])
                mod = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = mod
                spec.loader.exec_module(mod)
                folder = Path(b["dir"])
                init = _read(b["init"], folder)
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(b["seed"])
                    model = mod.ModelNew(*init)
                if isinstance(model, torch.nn.Module):
                    model = model.to(device=b["device"], dtype=getattr(torch, b["dtype"]))
                    w = b["weights"]
                    if w:
                        vals = dict(zip(w["keys"], _read(w["values"], folder, b["device"])))
                        mine = model.state_dict()
                        if set(mine) == set(vals) and all(tuple(mine[k].shape) == tuple(vals[k].shape) for k in vals):
                            model.load_state_dict(vals)
                ans: dict = {"ok": True}
            else:
                c = msg["call"]
                folder = Path(c["dir"])
                xs = _read(c["inputs"], folder)
                keep = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
                with torch.no_grad():
                    y = model(*xs)
                mutated = [i for i, (a, k) in enumerate(zip(xs, keep)) if isinstance(a, torch.Tensor) and not
                           (a.shape == k.shape and a.dtype == k.dtype and _bits(a) == _bits(k))]
                single = isinstance(y, torch.Tensor)
                if not single and not (isinstance(y, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in y)):
                    raise TypeError(f"{type(y).__name__} cannot cross from the isolated candidate (return a tensor "
                                    "or a tuple of tensors)")
                ys = [y] if single else list(y)
                (folder / "out").mkdir()
                heads = _write(ys, folder / "out")
                for h in heads:
                    if "file" in h:
                        h["file"] = f"out/{h['file']}".replace("out/", "o_")
                        (folder / "out" / h["file"][2:]).rename(folder / h["file"])
                (folder / "out").rmdir()
                ans = {"outputs": heads, "single": single, "mutated": mutated}
        except Exception as exc:  # noqa: BLE001 - the candidate's failure is reported, the loop goes on
            ans = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(ans) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
