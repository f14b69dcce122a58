"""Request files of the network-aware setting (``dcplace.workload.netreq.read_requests``)."""

from __future__ import annotations

import pytest


def test_a_request_file_may_ask_for_cpu_or_memory_only(tmp_path) -> None:
    """A live job may ask for one of them only (``NetJob``, ``POST /jobs``); its trace was a file no reader took."""
    from dcplace.errors import InputError
    from dcplace.workload.netreq import read_requests

    f = tmp_path / "r.csv"
    f.write_text("cpu,mem,bw,hold,id\n0,5,0.1,2,a\n5,0,0.1,2,b\n")
    got = read_requests(f)
    assert got.cpu.tolist() == [0, 5] and got.mem.tolist() == [5, 0]
    f.write_text("cpu,mem,bw,hold\n1,1,0.1,2\n0,0,0.1,2\n")
    with pytest.raises(InputError, match="line 3, field 'cpu': a request asks for some CPU or memory"):
        read_requests(f)
