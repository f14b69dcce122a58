"""Trace readers: good input round-trips; bad input is one InputError naming file, line and field."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dcplace.errors import InputError
from dcplace.workload import (
    load_trace,
    read_azure,
    read_huawei_events,
    read_huawei_lifetime,
    synthetic_trace,
    trace_available,
    write_huawei_events,
)
from dcplace.workload.azure import lifetime_bins


def test_lifetime_form(tiny_csv):
    t = read_huawei_lifetime(tiny_csv)
    assert len(t) == 4
    assert t.departure.tolist() == [100, 55, 37, 17]
    assert t.line.tolist() == [2, 3, 4, 5]
    assert t.with_double_numa_threshold(32).multi_numa.tolist() == [False, False, True, False]
    assert t.with_double_numa_threshold(10).multi_numa.tolist() == [True, False, True, False]


def test_event_log_round_trip(tmp_path):
    t = synthetic_trace(500, seed=3)
    p = tmp_path / "events.csv"
    write_huawei_events(t, p)
    back = read_huawei_events(p)
    assert np.array_equal(back.arrival, t.arrival)
    assert np.array_equal(back.departure, t.departure)
    assert np.array_equal(back.cpu, t.cpu) and np.array_equal(back.mem, t.mem)


def test_event_log_never_deleted_departs_at_inf(tmp_path):
    p = tmp_path / "ev.csv"
    p.write_text("vmid,cpu,memory,time,type\n7,1,2,0,0\n8,2,4,1,0\n7,1,2,5,1\n")
    t = read_huawei_events(p)
    assert t.departure.tolist() == [5.0, np.inf]


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("vmid,cpu,at,lt\n0,1,0,1\n", 1, "mem"),  # missing column
        ("vmid,cpu,mem,at,lt\n0,1,2,0,1\n1,x,2,1,1\n", 3, "cpu"),  # non-numeric
        ("vmid,cpu,mem,at,lt\n0,1,2,0,1\n1,1,-2,1,1\n", 3, "mem"),  # negative
        ("vmid,cpu,mem,at,lt\n0,1,2,5,1\n1,1,2,1,1\n", 3, "at"),  # unsorted
        ("vmid,cpu,mem,at,lt\n0,1,2,0,1\n0,1,2,1,1\n", 3, "vmid"),  # duplicate id
        ("vmid,cpu,mem,at,lt\n0,1,2,0,-1\n", 2, "lt"),  # negative lifetime
        ("vmid,cpu,mem,at,lt\n0,1,,0,1\n", 2, "mem"),  # empty cell
    ],
)
def test_lifetime_form_bad_input(tmp_path, text, line, field):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        read_huawei_lifetime(p)
    assert err.value.line == line and err.value.field == field
    assert str(p) in str(err.value) and f"line {line}" in str(err.value)


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("vmid,cpu,memory,time,type\n0,1,2,0,3\n", 2, "type"),
        ("vmid,cpu,memory,time,type\n0,1,2,0,0\n0,1,2,1,0\n", 3, "vmid"),  # created twice
        ("vmid,cpu,memory,time,type\n0,1,2,0,0\n5,1,2,1,1\n", 3, "vmid"),  # delete of unknown
        ("vmid,cpu,memory,time,type\n0,1,2,4,0\n1,1,2,1,0\n", 3, "time"),  # unsorted
        ("vmid,cpu,memory,time,type\n0,1,2,0,0\n1,1,2,1,0\n1,4,2,3,1\n", 4, "cpu"),  # freed another size
        ("vmid,cpu,memory,time,type\n0,1,2,0,0\n0,1,8,3,1\n", 3, "memory"),
    ],
)
def test_event_log_bad_input(tmp_path, text, line, field):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        read_huawei_events(p)
    assert (err.value.line, err.value.field) == (line, field)


def _azure_folder(tmp_path, life_line2="600 U1,C3,|"):
    (tmp_path / "flav_map.txt").write_text("1,0.75 a\n2,4 h\n")
    (tmp_path / "v1.interval_map.txt").write_text("0 0\n300 1\n600 2\n900 3\n1200 3\n")
    (tmp_path / "v1.dev.txt").write_text("300 a,|,h,|\n600 a,h,|\n")
    (tmp_path / "v1.dev.c1000.txt").write_text("300 U0,|,U2,|\n" + life_line2 + "\n")
    return tmp_path


def test_azure_reader(tmp_path):
    folder = _azure_folder(tmp_path)
    assert lifetime_bins(folder / "v1.interval_map.txt").tolist() == [150.0, 450.0, 750.0, 1200.0]
    t = read_azure(folder)
    assert len(t) == 4
    assert t.cpu.tolist() == [1, 2, 1, 2] and t.mem.tolist() == [0.75, 4, 0.75, 4]
    assert t.arrival.tolist() == [100.0, 200.0, 400.0, 500.0]  # spread inside each 300 s bin
    assert t.censored.tolist() == [False, False, False, True]
    assert t.departure[3] == 1000.0  # censored: leaves at the censoring time
    assert len(read_azure(folder, censored="drop")) == 3


def test_azure_misaligned_lifetimes(tmp_path):
    folder = _azure_folder(tmp_path, life_line2="600 U1,|")
    with pytest.raises(InputError) as err:
        read_azure(folder)
    assert err.value.line == 2 and err.value.field == "lifetime"


def test_synthetic_is_seeded():
    a, b, c = synthetic_trace(1000, seed=1), synthetic_trace(1000, seed=1), synthetic_trace(1000, seed=2)
    assert np.array_equal(a.cpu, b.cpu) and np.array_equal(a.departure, b.departure)
    assert not np.array_equal(a.cpu, c.cpu)


def test_unknown_trace_name():
    with pytest.raises(InputError):
        load_trace("no-such-trace")


@pytest.mark.skipif(not trace_available("huawei-east-1"), reason="shared data absent")
def test_real_huawei_trace():
    t = load_trace("huawei-east-1")
    assert len(t) == 116_313
    assert set(zip(t.cpu.tolist(), t.mem.tolist(), strict=True)).__len__() == 15


@pytest.mark.skipif(not trace_available("azure-v1"), reason="shared data absent")
def test_real_azure_trace():
    t = load_trace("azure-v1")
    assert len(t) == 259_159
    assert int(t.censored.sum()) == 14_317


def test_a_table_built_in_python_is_checked_and_frozen():
    """An extra departure was dropped, a NaN arrival and a negative cpu ran (a cpu of -100 added 100 free cores), a
    short multi_numa was an IndexError later, and t.cpu[0] = 999 changed a frozen table."""
    import numpy as np
    import pytest

    from dcplace.errors import InputError
    from dcplace.workload import RequestTable

    for args, kw, said in (
        (([0, 1], [5, 6, 7], [1, 2], [1, 1]), {}, "column departure has 3 rows"),
        (([float("nan"), 1], [5, 6], [1, 2], [1, 1]), {}, "has arrival nan"),
        (([0, 1], [5, 6], [-100, 2], [1, 1]), {}, "request 0 (vmid 0) has cpu -100"),
        (([0, 1], [5, 6], [1, 2], [1, 1]), {"multi_numa": [True]}, "column multi_numa has 1 rows"),
    ):
        with pytest.raises(InputError, match=re.escape(said)):
            RequestTable.from_arrays(*args, **kw)
    t = RequestTable.from_arrays([0, 1], [5, 6], [1, 2], [1, 1])
    with pytest.raises(ValueError, match="read-only"):
        t.cpu[0] = 999
    assert np.array_equal(t.cpu, [1, 2])


@pytest.mark.parametrize(("text", "gap"), [("0 0\n600 2\n", 1), ("0 0\n300 1\n600 2147483647\n", 2), ("5 1\n", 0)])
def test_a_missing_lifetime_bin_is_named_without_allocating_every_bin(tmp_path, text, gap):
    """A bin number of 2,147,483,647 made an array of that many bins (16 GiB, a MemoryError traceback)."""
    path = tmp_path / "v1.interval_map.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=f"bin {gap} has no duration"):
        lifetime_bins(path)
