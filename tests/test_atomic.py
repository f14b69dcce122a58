"""Atomic outputs: the target keeps its old content when the writer fails, and a folder is replaced as one unit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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


WRITER = """
import sys
from pathlib import Path
from dcplace.atomic import atomic_dir, write_bytes

out, what = Path(sys.argv[1]), sys.argv[2]
for round in range(1, 10**6):  # each round's bytes all have one value: a mix of two rounds is a torn write
    if what == "file":
        write_bytes(out / "big.bin", bytes([round % 251]) * 8_000_000)
    else:
        with atomic_dir(out / "run") as d:
            for k in range(8):
                (d / f"part{k}").write_bytes(bytes([round % 251]) * 1_000_000)
    print(round, flush=True)
"""


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_sigkilled_writer_leaves_the_target_whole(tmp_path: Path, what: str) -> None:
    """A real SIGKILL at moments spread over the writes (almost all of the writer's time is spent writing): the
    target is entirely one round's, never a torn or half-written one, and the next write removes what the killed
    process left. (With a plain write in place of the atomic one, the file case fails.)"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    for delay in (0.05, 0.13, 0.21, 0.34):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), what], env=env, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.readline()  # one whole round is written: the target exists
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if what == "file":
            parts = [(tmp_path / "big.bin").read_bytes()]
        else:  # killed between atomic_dir's two renames, the old folder is whole under .run.old-<pid>, no run
            folder = tmp_path / "run"
            if not folder.exists():
                [folder] = tmp_path.glob(f".run.old-{proc.pid}")
            assert sorted(p.name for p in folder.iterdir()) == [f"part{k}" for k in range(8)]
            parts = [(folder / f"part{k}").read_bytes() for k in range(8)]
        assert sum(map(len, parts)) == 8_000_000 and len({b for p in parts for b in set(p)}) == 1
    write_text(tmp_path / "big.bin", "after")
    with atomic_dir(tmp_path / "run") as d:
        (d / "x").write_text("1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin", "run"]  # the killed writers' temporaries gone


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


def test_only_the_helpers_own_writes_become_output_errors(tmp_path: Path) -> None:
    """A write the place refuses (here a full disk's ENOSPC, a permission error on the temporary) is an OutputError
    naming the target, which the command line says in one sentence; an error about anything else raised inside
    the block (an input that cannot be read) stays what it was (a review found one reported as the output)."""
    import errno

    from dcplace.atomic import OutputError, unwritable

    target = tmp_path / "out.json"
    for make in (lambda tmp: OSError(errno.ENOSPC, "No space left on device"),
                 lambda tmp: PermissionError(errno.EACCES, "Permission denied", str(tmp))):  # fmt: skip
        with pytest.raises(OutputError) as err, atomic_path(target) as tmp:
            raise make(tmp)
        assert err.value.filename == str(target) and not target.exists()
        said = unwritable(err.value)
        assert said is not None and f"{target} could not be written" in str(said)
    with pytest.raises(PermissionError) as err, atomic_dir(tmp_path / "run"):
        raise PermissionError(errno.EACCES, "Permission denied", "/some/input.csv")
    assert not isinstance(err.value, OutputError) and err.value.filename == "/some/input.csv"
    assert unwritable(err.value) is None
    with pytest.raises(OutputError), atomic_dir(tmp_path / "run") as tmp:
        raise OSError(errno.EROFS, "Read-only file system", str(tmp / "records.jsonl"))
    assert list(tmp_path.iterdir()) == []
