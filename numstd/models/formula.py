"""Bound formulas: a tiny, safe expression language for the error models in standard files.

A standard states its bound as text, e.g. ``"lam * u_acc * sqrt(K) * absdot"``, so that the file a
reviewer reads *is* the formula numstd evaluates.  Formulas are parsed with :mod:`ast` and only
arithmetic on names and numbers is allowed; nothing is ever passed to ``eval``.

Grammar: numbers, names (model terms or the standard's constants), ``+ - * / **``, unary ``-``,
parentheses and the functions ``sqrt``, ``log2``, ``abs``, ``max(a, b)``, ``min(a, b)`` (element-wise).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import SchemaError

__all__ = ["Formula", "FUNCTIONS"]

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
        return cls(text=text.strip(), names=frozenset(names), _tree=tree.body)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Evaluate element-wise with numpy broadcasting over the arrays in ``env``."""
        return _eval(self._tree, env)


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
