"""Atomic outputs: the target keeps its old content when the writer fails, and a folder is replaced as one unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcplace.atomic import atomic_dir, atomic_path, write_text


def test_write_text_replaces_whole(tmp_path: Path) -> None:
    f = tmp_path / "a.json"
    write_text(f, "old")
    write_text(f, "new")
    assert f.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    f = tmp_path / "a.json"
    write_text(f, "old")
    with pytest.raises(KeyboardInterrupt), atomic_path(f) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert f.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_atomic_dir_swaps_as_one_unit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with atomic_dir(out) as d:
        (d / "x").write_text("1")
        (d / "y").write_text("1")
    with pytest.raises(RuntimeError), atomic_dir(out) as d:
        (d / "x").write_text("2")
        raise RuntimeError("interrupted")
    assert {p.name: p.read_text() for p in out.iterdir()} == {"x": "1", "y": "1"}
    with atomic_dir(out) as d:
        (d / "z").write_text("3")
    assert [p.name for p in out.iterdir()] == ["z"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_temporaries_of_a_killed_process_are_removed(tmp_path: Path) -> None:
    """A SIGKILL runs no cleanup: the next write to the same target removes what that process left."""
    dead = 2**22 + 12345  # above the default pid_max: no such process
    (tmp_path / f".a.json.tmp-{dead}").write_text("half")
    (tmp_path / f".run.tmp-{dead}").mkdir()
    write_text(tmp_path / "a.json", "new")
    with atomic_dir(tmp_path / "run") as tmp:
        (tmp / "x").write_text("1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "run"]


def test_atomic_dir_carry_keeps_other_files(tmp_path: Path) -> None:
    target = tmp_path / "run"
    target.mkdir()
    (target / "config.toml").write_text("kept")
    (target / "sub").mkdir()
    (target / "sub" / "f").write_text("deep")
    (target / "checkpoint.pt").write_text("old")
    with atomic_dir(target, carry=True) as tmp:
        (tmp / "checkpoint.pt").write_text("new")
    assert (target / "checkpoint.pt").read_text() == "new"
    assert (target / "config.toml").read_text() == "kept" and (target / "sub" / "f").read_text() == "deep"
