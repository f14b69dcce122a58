"""A trace of a user's own: ``package.module:function`` wherever a trace is named (docs/workloads.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dcplace.errors import InputError
from dcplace.workload import RequestTable, load_trace

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"

BAD = """
import numpy as np
from dcplace.workload import RequestTable

def raises(seed):
    raise RuntimeError("no data today")

def exits(seed):
    import sys
    sys.exit("no data")

def not_a_table(seed):
    return [1, 2, 3]

def empty(seed):
    return RequestTable.from_arrays([], [], [], [])

def zero_cpu(seed):
    return RequestTable.from_arrays([0, 1, 2], [5, 6, 7], [1, 0, 2], [1, 1, 1])

def backwards(seed):
    return RequestTable.from_arrays([0, 1], [5, 0.5], [1, 1], [1, 1])

def oversize(seed):
    return RequestTable.from_arrays([0, 1], [5, 6], [1, 1000], [1, 1])
"""


@pytest.fixture
def on_path(monkeypatch, tmp_path):
    (tmp_path / "badtraces.py").write_text(BAD)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_the_worked_example_is_a_trace_by_name_and_seeded(on_path):
    a, b, c = (load_trace("bursty_trace:bursty", seed=s) for s in (0, 0, 1))
    assert isinstance(a, RequestTable) and len(a) == 20_000
    assert np.array_equal(a.cpu, b.cpu) and not np.array_equal(a.arrival, c.arrival)  # same seed, same trace
    assert (a.mem > 32).sum() > 0  # its bursts of double-NUMA VMs


@pytest.mark.parametrize(
    "ref, said",
    [
        ("badtraces:raises", "trace 'badtraces:raises' raised RuntimeError: no data today"),
        ("badtraces:exits", "trace 'badtraces:exits' raised SystemExit: no data"),  # it ended the process
        ("badtraces:not_a_table", "returned a list, not a RequestTable"),
        ("badtraces:empty", "returned no request"),
        ("badtraces:zero_cpu", "request 1 (vmid 1) has cpu 0"),
        ("badtraces:backwards", "'badtraces:backwards': request 1 (vmid 1) departs at 0.5, before its arrival at 1"),
        ("badtraces:missing", "module 'badtraces' has no attribute 'missing'"),
        ("nosuchmodule:x", "cannot import module 'nosuchmodule'"),
    ],
)
def test_a_bad_user_trace_is_one_sentence_naming_it(on_path, ref, said):
    with pytest.raises(InputError, match="trace") as err:
        load_trace(ref)
    assert said in str(err.value)


def test_an_oversize_vm_of_a_user_trace_names_the_trace(on_path):
    """It was named "<memory>"."""
    from dcplace.cluster import NumaCluster
    from dcplace.sim.episodes import check_hostable, prepare

    with pytest.raises(InputError, match=r"^trace badtraces:oversize, field 'cpu': VM 1 \(1000 cores"):
        check_hostable(NumaCluster.uniform(5), prepare(load_trace("badtraces:oversize"), 32.0))


def test_the_cli_runs_a_user_trace_from_the_current_folder():
    """From the example's folder, without PYTHONPATH: the console script did not search the current folder, so
    docs/examples/worst_fit.py's own "run it from this folder" failed too."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    cmd = [str(Path(sys.executable).parent / "dcplace"), "simulate", "numa", "--trace", "bursty_trace:bursty",
           "--pms", "20", "--episodes", "3", "--policy", "worst_fit:WorstFit", "--json"]  # fmt: skip
    done = subprocess.run(cmd, cwd=EXAMPLES, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["trace"] == "bursty_trace:bursty" and out["policy"] == "worst_fit:WorstFit" and out["length_mean"] > 0
