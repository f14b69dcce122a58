"""What an installed dcplace needs, declared: every file the package reads at run time is package data (an
installed wheel's ``dcplace demo`` failed on ``nalb-learned.json``, which no glob matched: the editable install of
``make setup`` reads ``src/`` and hid it), and every distribution the package imports is a dependency (pydantic and
starlette came only through fastapi). From a packaging review, 2026-11-28."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "dcplace"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_data_file_is_package_data() -> None:
    """Every file git tracks under src/dcplace that is not Python source (what a wheel built from a clone holds;
    every file outside ``__pycache__`` where git is absent)."""
    import shutil
    import subprocess

    globs = PROJECT["tool"]["setuptools"]["package-data"]["dcplace"]
    shipped = {p for g in globs for p in PACKAGE.glob(g)}
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "src/dcplace"], capture_output=True,
                             check=False) if shutil.which("git") else None  # fmt: skip
    if tracked is not None and tracked.returncode == 0 and tracked.stdout:
        files = {ROOT / f for f in tracked.stdout.decode().split("\0") if f}
    else:
        files = {p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    data = {p for p in files if p.suffix != ".py"}
    assert data, "no data files found: the test looks in the wrong place"
    missing = sorted(str(p.relative_to(PACKAGE)) for p in data - shipped)
    assert not missing, f"read at run time but not in the wheel (add a glob to package-data): {missing}"


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_imported_distribution_is_declared() -> None:
    declared = {_name(r) for r in PROJECT["project"]["dependencies"]}
    optional = {_name(r) for extra in PROJECT["project"]["optional-dependencies"].values() for r in extra}
    providers = importlib.metadata.packages_distributions()
    needed: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "dcplace" or top in sys.stdlib_module_names:
                    continue
                for dist in providers.get(top, [top]):
                    needed.setdefault(_name(dist), f"{path.relative_to(ROOT)}: import {name}")
    undeclared = {d: where for d, where in needed.items() if d not in declared | optional}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    unused = declared - set(needed) - {"httptools", "uvloop"}  # uvicorn's parser and loop, chosen by name
    assert not unused, f"declared but imported nowhere in the package (a dev or optional dependency?): {unused}"


def test_provenance_names_dcplace_s_commit_only_from_its_own_checkout(tmp_path: Path) -> None:
    """An install inside the user's own git repository reported that repository's commit as dcplace's; an install
    anywhere gave no version. The module copied into another repository, untracked there, says so."""
    import importlib.util
    import shutil
    import subprocess

    import dcplace
    from dcplace.bench.provenance import commit

    here = commit()
    if shutil.which("git") is None or "no git checkout" in here:  # a test run from an installed package
        assert here == f"{dcplace.__version__} (installed, no git checkout)"
        return
    assert re.fullmatch(rf"{re.escape(dcplace.__version__)} \([0-9a-f]{{12}}(\+dirty)?\)", here), here
    repo = tmp_path / "project"
    (repo / ".venv").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(repo), "add", "app.py"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "m"],
                   check=True)  # fmt: skip
    copy = repo / ".venv" / "provenance.py"
    shutil.copy(PACKAGE / "bench" / "provenance.py", copy)
    spec = importlib.util.spec_from_file_location("provenance_copy", copy)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.commit() == f"{dcplace.__version__} (installed, no git checkout)"
