"""dcplace.config: field docs from the source, validation at construction, TOML in and out, overrides."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dcplace import config
from dcplace.config import check, check_types
from dcplace.errors import InputError
from dcplace.sim.numa import Scenario


@dataclass(frozen=True)
class Inner:
    """A nested table."""

    size: int = 3
    """How many."""
    ratio: float = 0.5  # a trailing comment documents it too

    def __post_init__(self) -> None:
        check_types(self)
        check(self.size >= 1, "size", self.size, "at least 1")


@dataclass(frozen=True)
class Outer:
    name: str = "x"
    """The name.

    Second paragraph."""
    kind: Literal["a", "b"] = "a"
    flag: bool = False
    pair: tuple[int, int] = (1, 2)
    many: tuple[str, ...] = ()
    pairs: tuple[tuple[str, int], ...] = (("p", 1),)
    limit: float | None = None
    where: Path = Path("out")
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self) -> None:
        check_types(self)


def test_field_docs_from_docstrings_and_comments():
    docs = config.field_docs(Outer)
    assert docs["name"] == "The name.\n\nSecond paragraph."
    assert "kind" not in docs
    assert config.field_docs(Inner) == {"size": "How many.", "ratio": "a trailing comment documents it too"}
    assert config.field_docs(Scenario)["pms"].startswith("Machines at the start")


def test_leaves_walk_nested_tables_with_defaults():
    keys = {leaf.key: leaf.default for leaf in config.leaves(Outer)}
    assert keys["inner.size"] == 3 and keys["pair"] == (1, 2) and keys["limit"] is None


def test_construction_checks_types_and_values():
    assert Outer(pair=[3, 4]).pair == (3, 4)  # type: ignore[arg-type]  # lists become tuples
    assert isinstance(Inner(ratio=1).ratio, float)
    import numpy as np

    assert type(Inner(size=np.int64(4)).size) is int  # type: ignore[arg-type]
    with pytest.raises(InputError) as e:
        Outer(kind="c")  # type: ignore[arg-type]
    assert e.value.field == "kind" and "'c'" in str(e.value)
    with pytest.raises(InputError) as e:
        Inner(size=True)
    assert e.value.field == "size"
    with pytest.raises(InputError) as e:
        Inner(size=0)
    assert str(e.value) == "field 'size': must be at least 1, got 0"
    with pytest.raises(InputError, match="start_range"):
        Scenario(start_range=(5, 5))


def test_toml_round_trip(tmp_path):
    cfg = Outer(name='q"\\', kind="b", flag=True, many=("u", "v"), limit=2.5, inner=Inner(size=7))
    path = tmp_path / "c.toml"
    config.write(cfg, path, "# a header")
    assert path.read_text().startswith("# a header\n")
    assert config.load(Outer, path) == cfg
    assert config.load(Outer, _write(tmp_path, "")) == Outer()  # every key optional


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "in.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "field", "needle"),
    [
        ("nmae = 'x'\n", "nmae", "unknown key in the top-level table"),
        ("[inner]\nsise = 2\n", "inner.sise", "unknown key in table [inner]"),
        ("pair = [1]\n", "pair", "a list of 2 items"),
        ("kind = 'c'\n", "kind", "one of 'a', 'b'"),
        ("flag = 1\n", "flag", "true or false"),
        ("inner = 3\n", "inner", "a table"),
        ("[inner]\nsize = 0\n", "inner.size", "must be at least 1, got 0"),
        ("pairs = [['p', 'q']]\n", "pairs", "must be a list of"),
    ],
)
def test_file_errors_name_file_and_key(tmp_path, text, field, needle):
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as e:
        config.load(Outer, path)
    assert e.value.path == str(path) and e.value.field == field and needle in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_toml_names_file_and_line(tmp_path):
    path = _write(tmp_path, "name = 'x'\nflag = \n")
    with pytest.raises(InputError) as e:
        config.load(Outer, path)
    assert e.value.path == str(path) and e.value.line == 2 and "not valid TOML" in str(e.value)


def test_override_applies_dotted_keys_and_validates():
    cfg = config.override(Outer(), {"inner.size": 9, "name": "y"})
    assert cfg.inner.size == 9 and cfg.name == "y" and cfg.inner.ratio == 0.5
    with pytest.raises(InputError) as e:
        config.override(Outer(), {"inner.size": 0})
    assert e.value.field == "inner.size"


def test_merge_is_recursive():
    assert config.merge({"a": 1, "t": {"x": 1, "y": 2}}, {"t": {"y": 3}}) == {"a": 1, "t": {"x": 1, "y": 3}}


scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
)
keys = st.text(min_size=1, max_size=8)
documents = st.recursive(
    st.dictionaries(keys, st.one_of(scalars, st.lists(scalars, max_size=4))),
    lambda inner: st.dictionaries(keys, st.one_of(scalars, inner)),
    max_leaves=20,
)


@given(documents)
def test_dumps_is_read_back_by_tomllib(doc):
    assert tomllib.loads(config.dumps(doc)) == doc


def test_dumps_special_floats():
    back = tomllib.loads(config.dumps({"a": math.inf, "b": -math.inf, "c": math.nan}))
    assert back["a"] == math.inf and back["b"] == -math.inf and math.isnan(back["c"])


def test_generated_options_follow_the_fields():
    import inspect

    import typer

    from dcplace.cli.options import Flag, config_command

    seen = {}

    @config_command(Outer, {"inner.ratio": Flag(skip=True), "many": Flag(name="--item")})
    def run(cfg: Outer, loud: bool = False) -> None:
        seen["cfg"], seen["loud"] = cfg, loud

    params = inspect.signature(run).parameters
    assert "inner__ratio" not in params and "inner__size" in params and "loud" in params
    app = typer.Typer()
    app.command()(run)
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["--help"])
    for flag in ("--name", "--kind", "--flag", "--no-flag", "--pair", "--item", "--size", "--config", "--loud"):
        assert flag in res.output, flag
    assert "The name." in res.output and "How many." in res.output
    res = CliRunner().invoke(app, ["--kind", "b", "--pair", "5", "6", "--item", "u", "--item", "v", "--size", "4",
                                   "--flag", "--loud", "--pairs", '[["q", 2], ["r", 3]]'])  # fmt: skip
    assert res.exit_code == 0, res.output
    want = Outer(kind="b", pair=(5, 6), many=("u", "v"), flag=True, inner=Inner(size=4), pairs=(("q", 2), ("r", 3)))
    assert seen["cfg"] == want
    assert seen["loud"] is True
    res = CliRunner().invoke(app, ["--size", "0"])
    assert res.exit_code == 2 and "--size must be at least 1, got 0" in res.output
    res = CliRunner().invoke(app, ["--pairs", "[1"])
    assert res.exit_code == 2 and "--pairs must be a TOML value" in res.output
    res = CliRunner().invoke(app, ["--pairs", "[1]"])
    assert res.exit_code == 2 and "--pairs must be a list of" in res.output
