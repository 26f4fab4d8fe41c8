"""``@frozen``: a frozen dataclass whose ``__eq__``, ``__hash__`` and ``__repr__`` are written
once, here, instead of generated for each class.

Python 3.11's :mod:`dataclasses` compiles six small functions with ``exec`` for every
``@dataclass(frozen=True)`` class (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``, ``__delattr__``), about 0.8 ms a class: importing the gate created 52 of them
in 41 ms of its 129 ms, on every ``status``, hook and ``run`` (Python 3.13 compiles them in one
``exec``). Measured 2026-12-04, 15 interleaved rounds: a process importing the gate took
168 ms against 180 ms, one importing ``run``'s modules 197 ms against 215 ms.

``@frozen`` lets :func:`dataclasses.dataclass` make the class as before (fields, ``__init__``,
immutability, ``replace``, ``fields``, ``asdict``, ``__match_args__``) without
``eq`` and ``repr``, then gives it the three methods built from its field names, with the
meaning dataclasses gives them: equal when the other object is of exactly the same class and
the fields that ``compare`` are equal; the hash of those fields (``hash=`` overrides, as in
``field()``); ``Name(a=1, b='x')`` over the fields that ``repr``. A method the class body
defines itself is kept, as dataclasses keep it (``__hash__`` is added unless the body sets
one, a body that only defines ``__eq__`` included).
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True)`` for *cls*, with shared ``__eq__``, ``__hash__``, ``__repr__``."""
    body = dict(cls.__dict__)
    made = dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    compared = _key(tuple(f.name for f in fields if f.compare))
    hashed = _key(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    shown = tuple(f.name for f in fields if f.repr)
    if "__eq__" not in body:

        def __eq__(self: Any, other: object) -> bool:
            if other.__class__ is self.__class__:
                return bool(compared(self) == compared(other))
            return NotImplemented

        made.__eq__ = __eq__  # type: ignore[method-assign]
    explicit_hash = body.get("__hash__", dataclasses.MISSING)
    if explicit_hash is dataclasses.MISSING or (explicit_hash is None and "__eq__" in body):

        def __hash__(self: Any) -> int:
            return hash(hashed(self))

        made.__hash__ = __hash__  # type: ignore[method-assign]
    if "__repr__" not in body:

        @reprlib.recursive_repr()
        def __repr__(self: Any) -> str:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
            return f"{self.__class__.__qualname__}({inner})"

        made.__repr__ = __repr__  # type: ignore[method-assign]
    for name in ("__eq__", "__hash__", "__repr__"):
        method = made.__dict__.get(name)
        if name not in body and method is not None:
            method.__qualname__ = f"{made.__qualname__}.{name}"
    return made


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of *names*' values of an object (what dataclasses compare and hash)."""
    if len(names) > 1:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()
