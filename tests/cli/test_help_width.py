"""Help is plain Click text, so nothing is cut at 80 columns: every flag name reads whole (Rich's tables showed
``--alpha-beta-episo…``), and every command group is built that way."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

from dcplace.cli.main import COMMANDS


def test_every_command_group_uses_plain_help():
    for name, module in COMMANDS.items():
        app = importlib.import_module(module).app
        assert app.rich_markup_mode is None, name


def test_long_flag_names_read_whole_at_80_columns():
    env = dict(os.environ, COLUMNS="80", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "dcplace.cli.main", "reproduce", "nara", "--help"], capture_output=True,
                       text=True, timeout=120, env=env)  # fmt: skip
    assert p.returncode == 0 and "--alpha-beta-episodes <int>" in p.stdout and "…" not in p.stdout
