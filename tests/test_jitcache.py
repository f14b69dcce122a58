"""The numba cache follows every compiled module (dcplace.jitcache)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from dcplace import jitcache


def test_jit_modules_name_every_module_that_imports_numba():
    found = {
        str(p.relative_to(jitcache.PACKAGE))
        for p in jitcache.PACKAGE.rglob("*.py")
        if "import numba" in p.read_text() or "from numba" in p.read_text()
    }
    assert found == set(jitcache.JIT_MODULES)


@pytest.fixture
def copy_of_package(tmp_path, monkeypatch):
    """The compiled modules copied into a scratch package, with ``configure`` pointed at it."""
    for rel in jitcache.JIT_MODULES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(jitcache.PACKAGE / rel, tmp_path / rel)
    monkeypatch.setattr(jitcache, "PACKAGE", tmp_path)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    return tmp_path


def test_a_change_to_any_compiled_module_starts_a_fresh_cache(copy_of_package, monkeypatch):
    first = jitcache.configure()
    assert first is not None and first.is_dir() and os.environ["NUMBA_CACHE_DIR"] == str(first)
    monkeypatch.delenv("NUMBA_CACHE_DIR")  # as a new process would start (without the variable inherited)
    assert jitcache.configure() == first  # nothing changed: the same cache
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    (first / "kept.nbi").write_text("x")
    kernel = copy_of_package / "sim/numa_kernel.py"
    kernel.write_text(kernel.read_text() + "\n# changed\n")
    second = jitcache.configure()
    assert second is not None and second != first
    assert first.exists()  # recently used: a process of the older version may still be running
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    old = time.time() - 2 * jitcache.PRUNE_AFTER_S
    os.utime(first, (old, old))
    kernel.write_text(kernel.read_text() + "\n# changed again\n")
    third = jitcache.configure()
    assert third is not None and third not in (first, second)
    assert not first.exists() and second.exists()  # the stale cache is gone, the recent one kept


def test_a_cache_dir_the_user_set_is_left_alone(copy_of_package, monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert jitcache.configure() is None
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")
    assert not Path(copy_of_package / "__pycache__").exists()


def test_no_home_directory_is_no_error(copy_of_package, monkeypatch):
    """A container with an arbitrary uid has no home: the package's own cache directory still works."""

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    target = jitcache.configure()
    assert target is not None and target.parent == copy_of_package / "__pycache__"
