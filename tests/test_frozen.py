"""``@frozen`` (gitaudit/frozen.py) means what ``@dataclass(frozen=True)`` means: each class is
declared both ways and every behaviour compared."""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from gitaudit.frozen import frozen


def both(body: dict[str, Any], bases: tuple[type, ...] = ()) -> tuple[Any, Any]:
    """The class with *body* made by dataclasses and by ``@frozen`` (same name and fields); a
    callable under ``make:NAME`` makes NAME's default anew for each (a ``field()`` each)."""
    made: list[Any] = []
    for decorate in (dataclass(frozen=True), frozen):
        namespace = {
            k.removeprefix("make:"): (v() if k.startswith("make:") else v) for k, v in body.items()
        }
        made.append(decorate(type("Rec", bases, {"__module__": __name__, **namespace})))
    return made[0], made[1]


PLAIN = {"__annotations__": {"a": "int", "b": "str", "c": "tuple[int, ...]"}, "c": (1,)}


def test_equality_hash_and_repr_are_the_dataclass_ones() -> None:
    theirs, ours = both(PLAIN)
    for cls in (theirs, ours):
        one, same, other = cls(1, "x"), cls(1, "x"), cls(2, "x")
        assert (
            one == same and one.__ne__(same) is False and one != other and hash(one) == hash(same)
        )
        assert one != (1, "x", (1,)) and one.__eq__(object()) is NotImplemented
        assert {one, same, other} == {one, other}
    assert repr(ours(1, "x")) == repr(theirs(1, "x")) == "Rec(a=1, b='x', c=(1,))"
    assert hash(ours(1, "x")) == hash(theirs(1, "x"))  # the hash of the same tuple
    assert ours(1, "x") != theirs(1, "x")  # another class: never equal, as dataclasses say


def test_it_stays_a_frozen_dataclass() -> None:
    _, ours = both(PLAIN)
    rec = ours(1, "x")
    with pytest.raises(FrozenInstanceError):
        rec.a = 2
    with pytest.raises(FrozenInstanceError):
        del rec.a
    assert [f.name for f in dataclasses.fields(rec)] == ["a", "b", "c"]
    assert dataclasses.replace(rec, b="y") == ours(1, "y")
    assert dataclasses.asdict(rec) == {"a": 1, "b": "x", "c": (1,)}
    assert ours.__match_args__ == ("a", "b", "c")
    assert ours.__eq__.__qualname__ == "Rec.__eq__"
    assert dataclasses.is_dataclass(rec)


def test_field_options_compare_hash_and_repr() -> None:
    body = {
        "__annotations__": {"a": "int", "note": "str", "h": "int"},
        "make:note": lambda: field(default="", compare=False, repr=False),
        "make:h": lambda: field(default=0, compare=False, hash=True),
    }
    theirs, ours = both(body)
    for cls in (theirs, ours):
        assert cls(1, "x", 5) == cls(1, "y", 6)  # neither note nor h is compared
        assert hash(cls(1, "x", 5)) == hash(cls(1, "y", 5)) != hash(cls(1, "y", 6))
    assert repr(ours(1, "x", 5)) == repr(theirs(1, "x", 5)) == "Rec(a=1, h=5)"


def test_methods_the_body_defines_are_kept_as_dataclasses_keep_them() -> None:
    def eq(self: Any, other: object) -> bool:
        return True

    def rep(self: Any) -> str:
        return "mine"

    def hsh(self: Any) -> int:
        return 7

    theirs, ours = both({**PLAIN, "__eq__": eq})  # __eq__ alone: a __hash__ is still added
    for cls in (theirs, ours):
        assert cls(1, "x") == cls(2, "y") and hash(cls(1, "x")) == hash(cls(1, "x"))
        assert hash(cls(1, "x")) != hash(cls(2, "x"))
    theirs, ours = both({**PLAIN, "__repr__": rep, "__hash__": hsh})
    for cls in (theirs, ours):
        assert repr(cls(1, "x")) == "mine" and hash(cls(1, "x")) == 7


def test_inheritance_and_a_class_without_fields() -> None:
    base_theirs, base_ours = both(PLAIN)
    extra = {"__annotations__": {"d": "int"}, "d": 0}
    theirs: Any = dataclass(frozen=True)(type("Sub", (base_theirs,), dict(extra)))
    ours: Any = frozen(type("Sub", (base_ours,), dict(extra)))
    assert repr(ours(1, "x")) == repr(theirs(1, "x")) == "Sub(a=1, b='x', c=(1,), d=0)"
    assert ours(1, "x") != base_ours(1, "x") and ours(1, "x", d=1) != ours(1, "x")
    empty_theirs, empty_ours = both({})
    assert repr(empty_ours()) == repr(empty_theirs()) == "Rec()"
    assert empty_ours() == empty_ours() and hash(empty_ours()) == hash(())


def test_a_record_that_holds_itself_is_shown_without_recursing() -> None:
    _, ours = both({"__annotations__": {"items": "list[Any]"}})
    items: list[Any] = []
    rec = ours(items)
    items.append(rec)
    assert repr(rec) == "Rec(items=[...])"
