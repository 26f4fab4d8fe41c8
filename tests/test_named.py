"""gitaudit.named.NamedTuple makes the classes typing.NamedTuple makes, without importing typing."""

from __future__ import annotations

import pickle
import subprocess
import sys
import typing

import pytest

from gitaudit.named import NamedTuple


class Point(NamedTuple):
    """A point, with a label."""

    x: int
    y: int
    label: str = "origin"

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)

    def moved(self, dx: int) -> Point:
        return self._replace(x=self.x + dx)


class TypedPoint(typing.NamedTuple):
    """A point, with a label."""

    x: int
    y: int
    label: str = "origin"


def test_the_class_is_a_named_tuple_as_typing_makes_it() -> None:
    p = Point(1, -2)
    assert tuple(p) == (1, -2, "origin") == tuple(TypedPoint(1, -2))
    assert Point._fields == TypedPoint._fields == ("x", "y", "label")
    assert Point._field_defaults == TypedPoint._field_defaults == {"label": "origin"}
    assert repr(p) == "Point(x=1, y=-2, label='origin')"
    assert Point.__doc__ == TypedPoint.__doc__ == "A point, with a label."
    assert Point.__module__ == __name__ and Point.__qualname__ == "Point"
    assert Point.__annotations__ == {"x": "int", "y": "int", "label": "str"}
    assert hash(p) == hash((1, -2, "origin")) and isinstance(p, tuple)
    x, y, label = p
    assert (x, y, label) == (1, -2, "origin")
    with pytest.raises(AttributeError):
        p.x = 3  # type: ignore[misc]


def test_the_body_is_kept_and_instances_pickle() -> None:
    p = Point(3, 4, label="a")
    assert p.norm1 == 7 and p.moved(1) == Point(4, 4, "a")
    assert pickle.loads(pickle.dumps(p)) == p


def test_a_field_without_a_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows one with a default"):

        class Bad(NamedTuple):
            x: int = 0
            y: int  # type: ignore[misc]


def test_importing_it_does_not_import_typing() -> None:
    code = "import sys, gitaudit.named; print('typing' in sys.modules)"
    control = "import sys, gitaudit.frozen; print('typing' in sys.modules)"
    for probe, expected in ((code, "False"), (control, "True")):
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == expected
