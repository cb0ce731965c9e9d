"""Chunk plans: slicing an op's output (and the inputs that produce it) into bounded pieces.

``check`` judges large outputs chunk by chunk so that the float64 reference and its temporaries
stay small.  A plan splits one output axis ``j`` into ranges and iterates every index of the axes
before it, **in C order**, so the chunks concatenate to the output's flat order whatever the chunk
size — the accumulators in :mod:`numstd.distribution` rely on this.  An axis can be split only if
every output element along it depends on a matching slice of the inputs (not on a reduction over
it); ops without such an axis are judged in one chunk.

The reduced axis itself is cut where the op's reference can judge a piece of a row from the whole
row's statistics or a scan's carried state (:func:`_cuttable_reduced_axis`: softmax, log_softmax,
cumsum, layer_norm, rms_norm): when a row (with the axes
after it) is longer than the chunk, each chunk is a piece of one row along the reduced axis, and
carries the whole row (:class:`numstd.reference.RowPiece`), whose statistics the reference computes
in fixed blocks that do not depend on the cut.  The pieces still come in C order.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

__all__ = ["Chunk", "plan", "prefetch", "chunk_params", "DEFAULT_CHUNK", "default_chunk"]

DEFAULT_CHUNK = 1 << 16  # output elements per chunk (2^16: 1.4-1.9x faster than 2^18 and 0.17 of the input in extra memory, benchmarks/perf)
#: contractions do GEMMs per chunk: larger chunks keep BLAS efficient; their row ranges are also
#: rounded to whole blocks of ``reference.contraction.ROW_BLOCK`` rows (see :func:`plan`)
CONTRACTION_CHUNK = 1 << 19
#: the pooling ops (their last digit is the number of spatial axes)
POOLING = ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d")


def default_chunk(kind: str) -> int:
    """Default output elements per chunk for an op kind (the verdict does not depend on it)."""
    return CONTRACTION_CHUNK if kind in ("contraction", "attention") else DEFAULT_CHUNK


@dataclass(frozen=True)
class Chunk:
    """One piece: the output index and the inputs to compute it from."""

    out_index: tuple
    inputs: list
    prefix: tuple
    axis: int
    start: int
    row_offset: int = 0  # contractions: absolute number of the chunk's first row (reference row_offset)
    piece: Any = None  # a piece of whole rows along the reduced axis: its numstd.reference.RowPiece


def chunk_params(params: dict, ch: Chunk) -> dict:
    """The op parameters for a chunk's inputs: an ``axis`` counted on the whole input is moved down by
    the leading axes the chunk's integer prefix drops (a chunk of a 3-D softmax over axis 2 that
    fixes axis 0 has 2-D inputs, reduced along their axis 1)."""
    axis = params.get("axis")
    if not ch.prefix or isinstance(axis, bool) or not isinstance(axis, int):
        return params
    return dict(params, axis=axis - len(ch.prefix))


def _cuttable_reduced_axis(op: str, params: dict, out_ndim: int) -> int:
    """The reduced axis that chunks may cut too (-1: none): ops whose reference judges a piece of a row
    from statistics of the whole row that do not depend on the cut (numstd.reference.softmax) or
    from the carried state of the scan before the piece (cumsum, numstd.reference.reduction); the
    norms' rows are their last axis (numstd.reference.normalization)."""
    if op in ("softmax", "log_softmax", "cumsum"):
        return params["axis"]
    if op in ("layer_norm", "rms_norm") and out_ndim >= 1:
        return out_ndim - 1
    return -1


#: losses of one term per element (nll_loss: per row) of their inputs, then a reduction
_PAIRWISE_LOSSES: tuple[str, ...] = ("mse_loss", "huber_loss", "smooth_l1_loss", "kl_div", "nll_loss",
                                          "hinge_embedding_loss")


def _splittable_axes(op_kind: str, op: str, inputs: Sequence[np.ndarray], params: dict, out_ndim: int) -> int:
    """Number of leading output axes that may be split (axes ``0 .. n-1``)."""
    if out_ndim == 0 or op == "cast":  # (cast: scales of whole tensors, rows and 128 x 128 tiles)
        return 0
    if op_kind in ("elementwise", "exact"):
        return out_ndim
    if op in ("softmax", "log_softmax", "cumsum"):
        return params["axis"]
    if op in ("layer_norm", "rms_norm"):
        return out_ndim - 1
    if op in ("group_norm", "instance_norm") or (op == "batch_norm" and not params.get("training")):
        return 1  # whole samples (batch_norm eval: elementwise per channel)
    if op in POOLING:
        return out_ndim - int(op[-2])  # the batch and channel axes; windows slide over the spatial ones
    if op == "linear":
        return out_ndim - 1
    if op in ("conv", "conv_transpose"):  # the batch axis: each image needs only its own input (and the whole weight)
        return 1
    if op == "matmul":
        a, b = inputs
        if a.ndim < 2:
            return 0
        return out_ndim - 1 if b.ndim >= 2 else out_ndim
    if op == "attention":
        return out_ndim - 2 if params.get("causal") else out_ndim - 1
    if op in ("cross_entropy", *_PAIRWISE_LOSSES) and params.get("reduction") == "none":
        return out_ndim
    return 0


def _input_index(op: str, arr: np.ndarray, pos: int, out_ndim: int, idx: tuple, n_split: int) -> tuple | None:
    """The index of input ``pos`` for an output index over the first axes; None = use whole input."""
    if op in ("softmax", "log_softmax", "cumsum", "layer_norm", "rms_norm", "cross_entropy", *_PAIRWISE_LOSSES,
              "group_norm", "instance_norm", "batch_norm", *POOLING) or arr.ndim == out_ndim and op not in ("matmul", "attention", "linear", "conv", "conv_transpose"):
        if pos == 0 or (op in ("cross_entropy", *_PAIRWISE_LOSSES, "cumsum") and pos == 1):  # (cumsum's mask)
            return idx
        if op in ("layer_norm", "rms_norm") and len(idx) == out_ndim:  # a piece of rows: its weight and bias
            return idx[-1:]
        return None
    if op in ("linear", "conv", "conv_transpose"):
        return idx if pos == 0 else None
    if op in ("matmul", "attention"):
        # batch axes broadcast-align to the right of the output's batch axes
        core_out = 2
        nb_out = out_ndim - core_out
        if op == "matmul" and arr.ndim == 1:
            return None
        nb_in = arr.ndim - 2
        out_idx = []
        for k in range(len(idx)):
            if k < nb_out:
                a = k - (nb_out - nb_in)
                if a < 0:
                    continue
                sel = idx[k]
                if arr.shape[a] == 1:
                    sel = 0 if isinstance(sel, int) else slice(None)
                out_idx.append((a, sel))
            elif k == nb_out:  # the M / L axis: only the left operand (A, q) has it
                if pos == 0:
                    out_idx.append((arr.ndim - 2, idx[k]))
        full: list = [slice(None)] * arr.ndim
        for a, sel in out_idx:
            full[a] = sel
        # integer indices drop axes; keep order
        return tuple(full)
    return idx if pos == 0 else None


def plan(op_kind: str, op: str, inputs: Sequence[np.ndarray], params: dict, out_shape: tuple,
         chunk: int = DEFAULT_CHUNK) -> Iterator[Chunk]:
    """Yield chunks of the output in C order.

    Parameters
    ----------
    op_kind, op : str
        From the op catalog.
    inputs : list of arrays (validated)
    params : dict (validated, defaults filled)
    out_shape : tuple
    chunk : int
        Target number of output elements per chunk (≥ 1).  For matmul, linear and attention a
        chunk of rows holds whole aligned blocks of ``ROW_BLOCK`` rows (the step is rounded up), so
        that no BLAS block is computed twice.
    """
    chunk = max(1, int(chunk))
    n_split = _splittable_axes(op_kind, op, inputs, params, len(out_shape))
    reduced = _cuttable_reduced_axis(op, params, len(out_shape))
    size = math.prod(out_shape)
    if (n_split == 0 and reduced < 0) or size <= chunk or size == 0:
        yield Chunk(tuple(slice(None) for _ in out_shape), list(inputs), (), -1, 0)
        return
    # the first splittable axis j whose trailing block fits in a chunk; the reduced axis (when it
    # may be cut) only when a whole row does not fit
    axes = list(range(n_split)) + ([reduced] if reduced >= 0 else [])
    j = axes[-1]
    for k in axes:
        if math.prod(out_shape[k + 1:]) <= chunk:
            j = k
            break
    step = max(1, chunk // max(1, math.prod(out_shape[j + 1:])))
    rows_axis = _rows_axis(op, inputs, len(out_shape))
    if j == rows_axis and op not in ("conv", "conv_transpose"):  # (conv: a step of images is P rows each)
        from ..reference.contraction import ROW_BLOCK

        step = -(-step // ROW_BLOCK) * ROW_BLOCK
    for prefix in itertools.product(*(range(n) for n in out_shape[:j])):
        for start in range(0, out_shape[j], step):
            sl = slice(start, min(start + step, out_shape[j]))
            idx = tuple(prefix) + (sl,)
            ins = []
            for pos, arr in enumerate(inputs):
                if arr is None:
                    ins.append(None)
                    continue
                sel = _input_index(op, arr, pos, len(out_shape), idx, n_split)
                ins.append(arr if sel is None else arr[sel])
            row0 = _row_offset(op, out_shape, rows_axis, tuple(prefix), j, start)
            piece = None
            if j == reduced:
                from ..reference import RowPiece

                whole = [arr[tuple(prefix)] if pos == 0 or (op == "cumsum" and arr is not None) else None
                         for pos, arr in enumerate(inputs)]  # (the rows' x; cumsum: and its mask)
                piece = RowPiece(whole, sl.start, sl.stop, tuple(prefix))
            yield Chunk(idx + tuple(slice(None) for _ in out_shape[j + 1:]), ins, tuple(prefix), j, start, row0, piece)


def _rows_axis(op: str, inputs: Sequence[np.ndarray], out_ndim: int) -> int:
    """The output axis that numbers the rows of a contraction's left operand (-1: none).

    matmul and attention: the second-to-last axis (the last when ``B`` is a vector); linear: its
    rows are all leading axes flattened, numbered along the last of them; conv: its rows are
    ``n × P + p`` (``P`` output positions per image), numbered along the batch axis.
    """
    if op in ("conv", "conv_transpose"):
        return 0
    if op in ("matmul", "attention", "linear") and out_ndim >= 1:
        if op == "matmul" and inputs[1] is not None and np.ndim(inputs[1]) == 1:
            return out_ndim - 1
        return out_ndim - 2
    return -1


def _row_offset(op: str, out_shape: tuple, rows_axis: int, prefix: tuple, j: int, start: int) -> int:
    """Absolute number of the first left-operand row of a chunk (0 when it holds whole matrices)."""
    if rows_axis < 0:
        return 0
    if op in ("conv", "conv_transpose"):
        return start * math.prod(out_shape[2:]) if j == 0 else 0
    if op == "linear":
        lead = out_shape[:-1]
        idx = prefix + (start,) + (0,) * (len(lead) - j - 1)
        return int(np.ravel_multi_index(idx, lead)) if lead else 0
    return start if j == rows_axis else 0


def prefetch(items: Iterable[Any], prepare: Callable[[Any], Any], background: bool = True,
             workers: int = 1, finish: Callable[[Any], Any] | None = None) -> Iterator[Any]:
    """``finish(prepare(item))`` for each item, in order; with ``background``, up to ``workers`` items
    ahead are prepared on worker threads while the caller consumes the current one.

    ``check`` prepares chunks (reference, model terms: numpy, whose loops release the GIL) while it
    judges earlier ones in the compiled judge, which releases the GIL too, so all cores stay busy
    whichever stage is the slower one for the op.  Results come back in order and each is computed
    exactly as in the serial loop, so the verdict is the same; each runs in a copy of the caller's
    context (numpy's error state and allocator are context variables).  A single item is prepared
    inline (no thread).  An exception in ``prepare`` or ``finish`` is raised here, at the item that
    caused it.

    ``finish`` (default: none) is a second stage that may run on either side: on the worker after
    ``prepare``, or here before the item is handed to the caller.  Each item's stages are timed in
    thread CPU time (``time.thread_time``: what each stage costs, not how long it waited for a
    core), and items are submitted with ``finish`` on the side that minimises the slower of the two
    threads' totals per item, ``max(prepare + finish, consumer)`` against ``max(prepare, finish +
    consumer)``, from the means so far (:class:`_StageCosts`): for ``exp`` the compiled judge is the
    slower stage and the model's terms stay on the worker; for ``softmax`` the reference is, and
    they move beside the judge.  Where a stage runs never changes what it computes.

    Pipelining pays only while handing a prepared item to the other core is cheap.  On machines
    whose two cores do not share a cache (a VM whose virtual CPUs the host places on different
    core complexes, as this project's CI machine does at times), reading what the other thread
    wrote costs twice as much, and the pipeline becomes slower than doing everything on one thread
    (exp: 0.14 s against 0.107 s serial and 0.072 s pipelined when the caches are shared;
    docs/benchmarks.md).  So after a few items the pipeline's pace (wall time per item, consumer
    included) is compared with a few items done serially (:class:`_Pace`), and the faster way is
    kept for the rest.
    """
    finish = finish or _same
    it = iter(items)
    head = list(itertools.islice(it, 2))
    if not background or len(head) < 2:
        for item in itertools.chain(head, it):
            yield finish(prepare(item))
        return
    import contextvars
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    cost = _StageCosts()
    pace = _Pace()

    def work(x: Any, finish_here: bool) -> tuple:
        t0 = time.thread_time()
        r = prepare(x)
        t1 = time.thread_time()
        if finish_here:
            r = finish(r)
        return r, finish_here, t1 - t0, time.thread_time() - t1

    with ThreadPoolExecutor(workers, thread_name_prefix="numstd-prefetch") as threads:
        def submit(x: Any) -> Any:
            return threads.submit(contextvars.copy_context().run, work, x, not cost.finish_beside_consumer())

        pending: deque = deque()

        def take() -> Iterator[Any]:
            r, finished, t_prep, t_fin = pending.popleft().result()
            if not finished:
                t0 = time.thread_time()
                r = finish(r)
                t_fin = time.thread_time() - t0
            t0 = time.thread_time()
            yield r
            cost.add(t_prep, t_fin, time.thread_time() - t0)
            pace.done(serial=False)

        for item in itertools.chain(head, it):
            if pace.serial_next():
                while pending:  # (in order: what was submitted comes first)
                    yield from take()
                pace.start()
                yield finish(prepare(item))
                pace.done(serial=True)
                continue
            if len(pending) > workers:
                yield from take()
            pending.append(submit(item))
        while pending:
            yield from take()


class _Pace:
    """Whether :func:`prefetch` should pipeline or work serially, from wall time per item.

    After ``WARMUP`` items, ``PROBE`` items are timed in the pipeline (from one handed-out item to
    the next, the consumer included), then ``PROBE`` items are done serially; the first ``SETTLE``
    of those are not counted (the data the other thread wrote last must first move to this core:
    on machines where that is slow, exactly when serial work would win, the first serial items of
    exp took 0.83 and 0.59 ms and the next ones 0.45 ms†).  Serial work is kept when its mean is
    below ``MARGIN`` times the pipeline's, otherwise the pipeline resumes; either way the choice is
    made again after ``REPROBE`` more items (the machine may have changed).  A call with fewer
    items than the probe needs ends before it decides (its last items may then be serial).
    """

    WARMUP = 3
    PROBE = 4
    SETTLE = 2
    MARGIN = 0.9
    REPROBE = 256

    def __init__(self) -> None:
        self.count = 0  # items handed out
        self._reset()
        self.decided: bool | None = None  # True: serial work, False: the pipeline, None: probing
        self._t = 0.0

    def _reset(self) -> None:
        self.start_count = self.count
        self.marks: list = []  # perf_counter after each of the pipeline's measured items
        self.serial_times: list = []

    def serial_next(self) -> bool:
        """Whether the next item (about to be submitted) is done serially: after the pipeline was
        timed, for the probe and, if it was faster, from then on."""
        return self.decided if self.decided is not None else len(self.marks) > self.PROBE

    def start(self) -> None:
        """A serial item starts (the pipeline is drained)."""
        self._t = time.perf_counter()

    def done(self, serial: bool) -> None:
        """An item was handed out and the consumer came back for the next."""
        now = time.perf_counter()
        self.count += 1
        if self.decided is not None:
            if self.count - self.start_count >= self.REPROBE:
                self._reset()
                self.decided = None
            return
        if serial:
            self.serial_times.append(now - self._t)
            if len(self.serial_times) == self.PROBE:
                piped = (self.marks[-1] - self.marks[0]) / (len(self.marks) - 1)
                settled = self.serial_times[self.SETTLE:]
                self.decided = sum(settled) / len(settled) < self.MARGIN * piped
                self.start_count = self.count
        elif self.count - self.start_count > self.WARMUP and len(self.marks) <= self.PROBE:
            self.marks.append(now)  # (not the items drained before the probe)


def _same(x: Any) -> Any:
    return x


class _StageCosts:
    """Totals of the per-item CPU seconds of :func:`prefetch`'s stages."""

    def __init__(self) -> None:
        self.seen, self.n, self.prepare, self.finish, self.consume = 0, 0, 0.0, 0.0, 0.0

    def add(self, prepare: float, finish: float, consume: float) -> None:
        self.seen += 1
        if self.seen <= self.WARMUP:  # the first items run cold (first calls, page faults, caches)
            return
        self.n += 1
        self.prepare += prepare
        self.finish += finish
        self.consume += consume

    def finish_beside_consumer(self) -> bool:
        """Whether the next items should be finished beside the consumer: once ``MIN_ITEMS`` items
        after the first ``WARMUP`` were measured, when that is predicted ``MARGIN`` faster (otherwise
        on the worker, where a prepared item's intermediates are freed soonest: 8.9 vs 11.4 MiB
        peak for exp†)."""
        p, f, c = self.prepare, self.finish, self.consume  # (totals: the comparison of the means)
        return self.n >= self.MIN_ITEMS and max(p, f + c) < self.MARGIN * max(p + f, c)

    WARMUP = 2
    MIN_ITEMS = 3
    MARGIN = 0.95
