"""Bound formulas: a tiny, safe expression language for the error models in standard files.

A standard states its bound as text, e.g. ``"lam * u_acc * sqrt(K) * absdot"``, so that the file a
reviewer reads *is* the formula numstd evaluates.  Formulas are parsed with :mod:`ast` and only
arithmetic on names and numbers is allowed; nothing is ever passed to ``eval``.

Grammar: numbers, names (model terms or the standard's constants), ``+ - * / **``, unary ``-``,
parentheses and the functions ``sqrt``, ``log2``, ``abs``, ``max(a, b)``, ``min(a, b)`` (element-wise).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..core.errors import SchemaError
from ..core.native import VM_ARRAYS, VM_REGS

__all__ = ["Formula", "FUNCTIONS", "Program"]

FUNCTIONS: Mapping[str, tuple[int, Callable[..., Any]]] = {
    "sqrt": (1, np.sqrt),
    "log2": (1, np.log2),
    "abs": (1, np.abs),
    "max": (2, np.maximum),
    "min": (2, np.minimum),
}

_BINOPS: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Pow: np.power,
}


@dataclass(frozen=True)
class Formula:
    """A parsed, validated bound formula.

    Parameters
    ----------
    text : str
        The formula as written in the standard file.
    names : frozenset of str
        The names it uses (terms and constants).
    """

    text: str
    names: frozenset
    _tree: Any
    _sorted_names: tuple = ()

    @classmethod
    def parse(cls, text: str, allowed: set[str] | frozenset, where: str) -> "Formula":
        """Parse ``text``; every name must be in ``allowed``.

        Raises
        ------
        SchemaError
            Naming ``where`` (file and field), for syntax errors, unknown names or functions, and
            constructs outside the grammar.
        """
        if not isinstance(text, str) or not text.strip():
            raise SchemaError(f"{where}: a bound formula must be a non-empty string, got {text!r}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise SchemaError(f"{where}: formula {text!r} is not valid: {exc.msg}") from None
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Expression, ast.Load, ast.operator, ast.unaryop)):
                if isinstance(node, ast.operator) and type(node) not in _BINOPS:
                    raise SchemaError(f"{where}: operator {type(node).__name__} is not allowed in {text!r}")
                continue
            if isinstance(node, ast.BinOp) or isinstance(node, ast.UnaryOp):
                if isinstance(node, ast.UnaryOp) and not isinstance(node.op, (ast.USub, ast.UAdd)):
                    raise SchemaError(f"{where}: operator {type(node.op).__name__} is not allowed in {text!r}")
                continue
            if isinstance(node, ast.Constant):
                if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                    raise SchemaError(f"{where}: only numbers may appear as constants in {text!r}")
                continue
            if isinstance(node, ast.Call):
                fname = node.func.id if isinstance(node.func, ast.Name) else None
                if fname not in FUNCTIONS or node.keywords:
                    raise SchemaError(
                        f"{where}: unknown function in {text!r}; allowed: {', '.join(sorted(FUNCTIONS))}"
                    )
                if len(node.args) != FUNCTIONS[fname][0]:
                    raise SchemaError(f"{where}: {fname}() takes {FUNCTIONS[fname][0]} argument(s) in {text!r}")
                continue
            if isinstance(node, ast.Name):
                if node.id in FUNCTIONS:
                    continue
                if node.id not in allowed:
                    raise SchemaError(
                        f"{where}: unknown name {node.id!r} in formula {text!r}; "
                        f"use one of {', '.join(sorted(allowed))}"
                    )
                names.add(node.id)
                continue
            raise SchemaError(f"{where}: {type(node).__name__} is not allowed in formula {text!r}")
        return cls(text=text.strip(), names=frozenset(names), _tree=tree.body, _sorted_names=tuple(sorted(names)))

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Evaluate element-wise with numpy broadcasting over the arrays in ``env``.

        IEEE 754 arithmetic without warnings, as the compiled loop (:meth:`program`) computes it: a
        term divided by a zero (layer_norm's ``sigma`` of a constant row with ``eps = 0``) is an
        infinite bound there, so it is here too, silently (numpy would warn where C does not; the
        verdict is the same on both paths).  ``np.errstate`` is a context variable: thread-safe.
        """
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _eval(self._tree, env)

    def compute(self, env: Mapping[str, Any], shape: tuple) -> np.ndarray:
        """:meth:`evaluate` broadcast to ``shape`` as a new float64 array: in one compiled pass
        (:meth:`program`, C order: every array term is C-contiguous then) where that applies, else
        numpy's own result (in the memory order numpy chose); the same values either way."""
        from ..core.native import compiled

        nat = compiled()
        prog = self.program(env, shape, absref_of_values=False) if nat is not None and math.prod(shape) else None
        if prog is None:  # numpy's result as it is: its memory order matters to later reductions
            v = np.asarray(self.evaluate(env), dtype=np.float64)
            if v.shape != tuple(shape):
                return np.broadcast_to(v, shape).copy()
            return v.copy(order="K") if any(v is t for t in env.values()) else v
        out = np.empty(shape)
        nat.model_eval(prog.code, prog.consts, prog.arrays, prog.rowlen, None, None, out, None, 0.0, False, 0.0, 1.0, 1.0)
        return out

    def program(self, env: Mapping[str, Any], shape: tuple, absref_of_values: bool = True) -> "Program | None":
        """The formula compiled for :func:`numstd._native.model_eval` on values of ``shape``, or None
        where the compiled loop cannot compute exactly what :meth:`evaluate` computes.

        Subexpressions of single values are evaluated here, by :meth:`evaluate`'s own code (so the
        same bits); the rest becomes one instruction per operation ``+ - * /``, unary ``-``, ``sqrt``
        and ``abs``, on terms of ``shape`` (C-contiguous float64), terms with one value per row
        (shape ``shape[:-1] + (1,)``) or per column (shape ``(shape[-1],)``, with leading 1s) and
        ``absref`` (with ``absref_of_values``: taken as ``|values|`` of the values passed to
        ``model_eval``, which is what :func:`numstd.models.environment` gives).  ``**``, ``log2``,
        ``max`` and ``min`` of arrays, other broadcasts, or more than :data:`Program.REGISTERS`
        live values give None.  The code is kept per formula, shape, kinds of the array terms and
        values of the single ones, so ``check`` compiles once for all its chunks.
        """
        shape = tuple(shape)
        key: list = [self.text, shape, absref_of_values]
        scalars: dict = {}
        arrays: dict = {}
        kinds: dict = {}
        for name in self._sorted_names:  # (this loop runs once per chunk: kept lean)
            if name == "absref" and absref_of_values:
                continue
            try:
                v = env[name]
            except KeyError:  # (evaluate() says which term is missing)
                return None
            if type(v) is float or (type(v) is np.ndarray and not v.shape) or np.ndim(v) == 0:
                scalars[name] = v
                key.append(float(v))
                continue
            kind = _array_kind(v, shape)
            if kind is None:
                return None
            arrays[name], kinds[name] = v, kind
            key.append(_KIND_KEYS[kind])  # (a tuple: never equal to a single value's float)
        key_t = tuple(key)
        plan = _PLANS.get(key_t, False)
        if plan is False:
            plan = _compile(self._tree, scalars, absref_of_values, kinds)
            if len(_PLANS) >= 256:
                _PLANS.clear()
            _PLANS[key_t] = plan
        if plan is None:
            return None
        code, consts, names = plan
        return Program(code, consts, tuple(arrays[n] for n in names), shape[-1] if shape else 1)


def _array_kind(x: Any, shape: tuple) -> int | None:
    """How ``model_eval`` reads the array term ``x`` against values of ``shape`` (None: it cannot)."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float64 or not shape or not x.flags.c_contiguous:
        return None
    if x.shape == shape:
        return _ARR
    if x.shape == shape[:-1] + (1,):
        return _ROW
    if x.shape[-1:] == shape[-1:] and x.size == shape[-1] and x.ndim <= len(shape):
        return _COL  # (n,) or (1, .., 1, n): one value per column
    return None


def _compile(tree: Any, scalars: dict, absref_of_values: bool, kinds: dict) -> tuple | None:
    """(code, constants, names of the array terms in operand order) for :meth:`Formula.program`, or
    None where the formula needs numpy."""
    compiler = _Compiler(scalars, absref_of_values, kinds)
    try:
        loc = compiler.emit(tree)
        if loc[0] != _REG:
            compiler.code.append((_OPS["copy"], compiler.register(), *loc, _CONST, 0))
    except _NotCompiled:
        return None
    return (np.array(compiler.code, dtype=np.int32).reshape(-1), np.array(compiler.consts, dtype=np.float64),
            tuple(compiler.arrays))


_PLANS: dict = {}  # Formula.program's key -> _compile's result (None: not compilable)
_KIND_KEYS = {k: ("array", k) for k in range(6)}


@dataclass(frozen=True)
class Program:
    """A formula compiled by :meth:`Formula.program`: instructions of six int32 (operation,
    destination register, operand kind and index, second operand kind and index), the constants
    and the arrays they index, and the row length of per-row terms."""

    code: np.ndarray
    consts: np.ndarray
    arrays: tuple
    rowlen: int

    REGISTERS = VM_REGS  # intermediate values live at once (numstd/_native.c: VM_REGS)
    ARRAYS = VM_ARRAYS  # arrays a program may read (VM_ARRAYS)


# operand kinds and operations of numstd/_native.c's model_eval (VM_REG.., VM_ADD..)
_REG, _ARR, _ROW, _CONST, _ABSREF, _COL = range(6)
_OPS = {"add": 0, "sub": 1, "mul": 2, "div": 3, "neg": 4, "sqrt": 5, "abs": 6, "copy": 7}
_BINOP_CODES = {ast.Add: _OPS["add"], ast.Sub: _OPS["sub"], ast.Mult: _OPS["mul"], ast.Div: _OPS["div"]}
_UNARY_CODES = {"sqrt": _OPS["sqrt"], "abs": _OPS["abs"]}


class _NotCompiled(Exception):
    pass


class _Compiler:
    """Code generation for :meth:`Formula.program`: one register per live intermediate value."""

    def __init__(self, scalars: dict, absref_of_values: bool, kinds: dict) -> None:
        self.scalars, self.absref_of_values, self.kinds = scalars, absref_of_values, kinds
        self.code: list = []
        self.consts: list = []
        self.arrays: list = []  # names of the array terms, in operand order
        self.free = list(range(Program.REGISTERS - 1, -1, -1))

    def register(self) -> int:
        if not self.free:
            raise _NotCompiled
        return self.free.pop()

    def release(self, loc: tuple) -> None:
        if loc[0] == _REG:
            self.free.append(loc[1])

    def const(self, value: Any) -> tuple:
        self.consts.append(float(value))
        return (_CONST, len(self.consts) - 1)

    def scalar(self, node: Any) -> bool:
        """Whether ``node`` is a single value (no array terms under it)."""
        return all(n.id in self.scalars for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in FUNCTIONS)

    def term(self, name: str) -> tuple:
        if name == "absref" and self.absref_of_values:
            return (_ABSREF, 0)
        if name not in self.arrays:
            if len(self.arrays) == Program.ARRAYS:
                raise _NotCompiled
            self.arrays.append(name)
        return (self.kinds[name], self.arrays.index(name))

    def emit(self, node: Any) -> tuple:
        """The location (kind, index) of ``node``'s value once the code emitted so far has run."""
        if self.scalar(node):
            v = _eval(node, self.scalars)
            if np.size(v) != 1:
                raise _NotCompiled
            return self.const(v)
        if isinstance(node, ast.Name):
            return self.term(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_CODES:
            a, b = self.emit(node.left), self.emit(node.right)
            self.release(a)
            self.release(b)
            dst = self.register()
            self.code.append((_BINOP_CODES[type(node.op)], dst, *a, *b))
            return (_REG, dst)
        if isinstance(node, ast.UnaryOp):
            a = self.emit(node.operand)
            if isinstance(node.op, ast.UAdd):
                return a
            self.release(a)
            dst = self.register()
            self.code.append((_OPS["neg"], dst, *a, _CONST, 0))
            return (_REG, dst)
        if isinstance(node, ast.Call) and node.func.id in _UNARY_CODES:
            a = self.emit(node.args[0])
            self.release(a)
            dst = self.register()
            self.code.append((_UNARY_CODES[node.func.id], dst, *a, _CONST, 0))
            return (_REG, dst)
        raise _NotCompiled  # **, log2, max, min of arrays: numpy's own loops


def _eval(node: Any, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return np.negative(v) if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id][1](*[_eval(a, env) for a in node.args])
    return env[node.id]
