"""``NamedTuple`` for the hot paths: :class:`typing.NamedTuple`'s class syntax without importing
:mod:`typing`.

The hooks, ``status`` and the agent hooks answer in 20-40 ms, and importing :mod:`typing` costs
about 2.5 ms of that (measured 2026-12-04: a process importing what the agent stop hook imports
took 27 ms with typing, 24.5 ms without). Their records are named tuples declared the typed way::

    from gitaudit.named import NamedTuple

    class Answer(NamedTuple):
        allow: bool
        reason: str = ""

Type checkers see :class:`typing.NamedTuple` itself. At run time the class statement makes the
same class typing would: :func:`collections.namedtuple` of the annotated fields, in order, with
their defaults, and the rest of the body (methods, properties, the docstring) set on it. As with
typing's, a method cannot use ``super()`` without arguments (the class is made anew), and a
field without a default cannot follow one with a default.

Modules on those paths that need :mod:`typing` only for annotations spell ``TYPE_CHECKING =
False`` (type checkers take it as true) instead of importing it.
"""

from __future__ import annotations

__all__ = ["NamedTuple"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    import collections

    # what the class body holds that is no field, method or attribute of the named tuple
    _MADE_HERE = frozenset(("__annotations__", "__module__", "__qualname__", "__dict__"))

    class _Make(type):
        """Makes each subclass of :class:`NamedTuple` a :func:`collections.namedtuple`."""

        def __new__(mcls, name: str, bases: tuple[type, ...], body: dict[str, object]):
            if not bases:  # NamedTuple itself
                return super().__new__(mcls, name, bases, body)
            fields = tuple(body.get("__annotations__", {}))
            defaults = [body[f] for f in fields if f in body]
            if any(f not in body for f in fields[len(fields) - len(defaults) :]):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            made = collections.namedtuple(
                name, fields, defaults=defaults, module=str(body["__module__"])
            )
            made.__qualname__ = str(body.get("__qualname__", name))
            made.__annotations__ = dict(body.get("__annotations__", {}))
            for key, value in body.items():
                if key not in _MADE_HERE and key not in fields:
                    setattr(made, key, value)
            return made

    class NamedTuple(metaclass=_Make):
        """Subclass me as :class:`typing.NamedTuple` (see the module's docstring)."""
