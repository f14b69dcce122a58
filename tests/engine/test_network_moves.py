"""Moving running network jobs: make_room's plans carried out (at once, or move by move with ``move``), the
independent checker of those plans, and what a move writes (the jobs table, the journal, a trace)."""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcplace.cluster.topology import preset
from dcplace.engine import Conflict, NetJob, NetworkEngine, NotFound, check_room_plan
from dcplace.engine.network import SCHEMA_VERSION, network_trace, read_network_journal
from dcplace.errors import InputError
from dcplace.sim.netalloc_episodes import episode_requests

ALPHA = preset("alpha")


def _rows(e: NetworkEngine) -> dict[str, tuple]:
    """Every job by id, its servers in any order with their amounts, its links in any order, its bandwidth."""
    return {
        j.id: (sorted(zip(j.servers, j.cpu, j.mem, strict=True)), sorted(map(sorted, j.links)), j.bw) for j in e.jobs()
    }


def _refusals(policy: str, seed: int, n: int = 160, execute_every: int = 0, tmp: Path | None = None):
    """An alpha episode placed job by job; at each network refusal, ``make_room`` asked (and executed on every
    ``execute_every``-th: each says it was executed exactly then). Yields (engine, job, plan, jobs before the plan)
    at each plan that accepts the job."""
    top = ALPHA
    e = NetworkEngine.open(tmp / "n.db", top, policy) if tmp is not None else NetworkEngine(top, policy)
    req = episode_requests(top, "uniform", n, seed % 7 + 1, seed)
    k = 0
    for i in range(len(req.cpu)):
        job = NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / 1e6, hold=i % 5 + 1)
        d = e.place(job)
        if not d.accepted and d.reason == "network":
            before = [j.as_dict() for j in e.jobs()]
            k += 1
            asked = bool(execute_every) and k % execute_every == 0
            plan = e.make_room(job, execute=asked)
            assert plan.executed == (asked and plan.accepted)
            if plan.accepted:
                yield e, job, plan, before
        if i % 3 == 0 and i:
            for j in e.jobs()[:2]:
                e.release(j.id)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["tetris-bw", "nalb-strict", "random", "tetris"]), st.integers(0, 10_000))
def test_every_plan_passes_the_checker_and_an_executed_one_runs_as_planned(policy: str, seed: int) -> None:
    """Each plan make_room answers passes the independent checker (carried out cold, in its order); an executed
    plan leaves every job exactly where the plan's inventory says, moved jobs keeping their declared hold, and the
    engine's invariants hold."""
    plans = executed = 0
    for e, job, plan, before in _refusals(policy, seed, execute_every=2):
        plans += 1
        drained: list[str] = []
        request = {"id": job.id, "cpu": job.cpu, "mem": job.mem, "bw": job.bw}
        assert check_room_plan(e.topology, before, drained, request, plan.as_dict()) == []
        holds = {j["id"]: j["hold"] for j in before}
        if plan.executed:
            executed += 1
            listed = {j["id"]: j for j in plan.inventory}
            assert _rows(e) == {
                i: (sorted(zip(j["servers"], j["cpu"], j["mem"], strict=True)), sorted(map(sorted, j["links"])),
                    j["bw"]) for i, j in listed.items()
            }  # fmt: skip
            assert all(e.job(i).hold == holds[i] for i in holds) and e.job(job.id).hold == job.hold
            e.check_invariants()
        else:
            assert job.id not in {j.id for j in e.jobs()}
    assert executed <= plans


def test_a_plan_carried_out_move_by_move_ends_where_the_executed_plan_does(tmp_path: Path) -> None:
    """Two engines with the same jobs: one executes the plan, the other is told each move in the plan's order
    (``move``, as a client carrying it out would) and then records the job by a reconcile of the plan's
    inventory. They end equal, after every step the invariants hold, and a restart reloads the executed one."""
    seen = 0
    for _, job, plan, before in _refusals("tetris-bw", 3):
        if len(plan.moves) < 1:
            continue
        told = NetworkEngine(ALPHA, "tetris-bw")
        told.reconcile(before)
        done = NetworkEngine(ALPHA, "tetris-bw")
        done.reconcile(before)
        done.make_room(job, execute=True)
        for step in sorted({m.step for m in plan.moves}):  # a step's moves together, as the plan lists them
            rows = [m.as_dict() for m in plan.moves if m.step == step]
            if len(rows) == 1:
                told.move(rows[0]["id"], rows[0])
            else:
                told.moves(rows)
            told.check_invariants()
        if plan.moves:  # a plan told twice: its moves' `from` is no longer where the jobs run
            with pytest.raises(Conflict, match="the plan is older"):
                told.moves([plan.moves[0].as_dict()])
        told.reconcile(list(plan.inventory))
        assert _rows(told) == _rows(done)
        seen += 1
        if seen >= 4:
            break
    assert seen, "no plan with moves in this episode: choose another seed"
    db = tmp_path / "n.db"
    found = (x[:3] for x in _refusals("tetris-bw", 3, execute_every=1, tmp=tmp_path) if x[2].moves)
    e, job, plan = next(found)
    want = _rows(e)
    e.close()
    again = NetworkEngine.open(db, ALPHA, "tetris-bw")
    assert _rows(again) == want and again.job(job.id).hold == job.hold
    again.check_invariants()
    moved = read_network_journal(db, event="moved", limit=None)
    assert {x.job for x in moved[-len(plan.moves) :]} == {m.id for m in plan.moves}
    assert all(x.by == "make-room" for x in moved)
    placed = read_network_journal(db, job=job.id, event="placed")
    assert placed[-1].by == "make-room"
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    again.close()


def test_the_checker_finds_what_is_wrong_with_a_plan() -> None:
    """A plan built by hand on alpha: job a fills s0, b half of s1; a moves to s1 only after b moves to s2. The
    sound plan passes; each thing wrong with a variant is named (the checker is not vacuous)."""
    n = ALPHA.node_names
    s0, s1, s2, r0 = n[0], n[1], n[2], n[ALPHA.n_servers]
    jobs = [
        {"id": "a", "servers": [s0], "cpu": [10], "mem": [10], "links": [], "bw": 0.1},
        {"id": "b", "servers": [s1], "cpu": [5], "mem": [5], "links": [], "bw": 0.1},
    ]
    moves = [
        {"id": "b", "from": [s1], "servers": [s2], "cpu": [5], "mem": [5], "links": []},
        {"id": "a", "from": [s0], "servers": [s1], "cpu": [10], "mem": [10], "links": []},
    ]
    placement = {"id": "c", "servers": [s0, s2], "cpu": [6, 4], "mem": [6, 4], "links": [[s0, r0], [s2, r0]],
                 "bw": 0.5}  # fmt: skip
    inventory = [{**jobs[0], "servers": [s1]}, {**jobs[1], "servers": [s2]}, placement]
    plan = {"accepted": True, "placement": placement, "moves": moves, "inventory": inventory}
    request = {"id": "c", "cpu": 10, "mem": 10, "bw": 0.5}
    assert check_room_plan(ALPHA, jobs, [], request, plan) == []

    def problems(change) -> list[str]:
        p = copy.deepcopy(plan)
        change(p)
        return check_room_plan(ALPHA, jobs, [], request, p)

    assert any("gives 15 CPU of 10" in x for x in problems(lambda p: p["moves"].reverse()))  # a before b
    assert any("runs on" in x for x in problems(lambda p: p["moves"][0].update({"from": [s0]})))
    assert any("size" in x or "CPU or memory" in x for x in problems(lambda p: p["moves"][0].update({"cpu": [4]})))
    assert any("moves twice" in x for x in problems(lambda p: p["moves"].append({**p["moves"][0], "step": 2})))
    assert any("not in order" in x for x in problems(lambda p: p["moves"][0].update({"step": 5})))
    together = copy.deepcopy(plan)  # a before b in one step: both stopped first, so it fits
    together["moves"] = [{**together["moves"][1], "step": 0}, {**together["moves"][0], "step": 0}]
    assert check_room_plan(ALPHA, jobs, [], request, together) == []
    assert any("no such job" in x for x in problems(lambda p: p["moves"][0].update({"id": "z"})))
    assert any("do not join" in x for x in problems(lambda p: p["placement"].update({"links": [[s0, r0]]})))
    assert any("not a link" in x for x in problems(lambda p: p["placement"].update({"links": [[s0, s2]]})))
    for pair in ([s0], [], [s0, r0, s2, r0]):  # not a pair: one problem, never an exception (a review)
        said = problems(lambda p, pair=pair: p["moves"][0].update({"links": [pair]}))
        assert any("not well formed" in x for x in said), said
    assert any("does not take what" in x for x in problems(lambda p: p["placement"].update({"cpu": [5, 4]})))
    assert any("inventory" in x for x in problems(lambda p: p["inventory"].pop()))
    assert any("elsewhere" in x for x in problems(lambda p: p["inventory"][0].update({"servers": [s0]})))
    assert any("carries" in x for x in problems(lambda p: p["placement"].update({"bw": 1.5})))
    drained = check_room_plan(ALPHA, jobs, [s2], request, plan)
    assert any("drained server " + s2 in x for x in drained)
    refused = {"accepted": False, "placement": None, "moves": [], "inventory": []}
    assert check_room_plan(ALPHA, jobs, [], request, refused) == []
    assert check_room_plan(ALPHA, jobs, [], request, {**refused, "moves": moves}) != []


def test_a_move_is_recorded_cold_and_journalled_and_a_trace_reads_it_as_the_same_job(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    e = NetworkEngine.open(db, ALPHA, "tetris")
    n = ALPHA.node_names
    a = e.place(NetJob("a", 12, 8, 0.2, hold=3))
    e.place(NetJob("b", 4, 4, 0.1))
    assert a.accepted and len(a.servers) == 2
    # the same servers, another split: possible cold (its old share free first), not with both held
    split = {"servers": list(a.servers), "cpu": [2, 10], "mem": [4, 4]}
    moved = e.move("a", split)
    assert (moved.servers, moved.cpu, moved.mem, moved.hold) == (a.servers, (2, 10), (4, 4), 3)
    e.check_invariants()
    far = [s for s in n[: ALPHA.n_servers] if s not in a.servers and not e.server(s).jobs][:2]
    moved = e.move("a", {"servers": far, "cpu": [6, 6], "mem": [4, 4]})  # links routed
    assert moved.servers == tuple(far) and moved.links and moved.bw == 0.2
    assert e.move("a", {"servers": far, "cpu": [6, 6], "mem": [4, 4]}) == moved  # where it runs: nothing written
    entries = read_network_journal(db, event="moved", limit=None)
    assert [(x.job, x.cpu, x.mem, x.bw, x.hold, x.by) for x in entries] == [("a", 12, 8, 0.2, 3, "move")] * 2
    assert e.counters["moved"] == 2
    e.drain_server(n[20])
    for row, field, words in (
        ({"servers": far, "cpu": [6, 5], "mem": [4, 4]}, "cpu", "a move keeps its size"),
        ({"servers": far, "cpu": [6, 6]}, "mem", "is missing"),
        ({"servers": [far[0], n[20]], "cpu": [6, 6], "mem": [4, 4]}, "servers", "drained"),
        ({"servers": [far[0], "nowhere"], "cpu": [6, 6], "mem": [4, 4]}, "servers", "not a server"),
        ({"servers": far, "cpu": [6, 6], "mem": [4, 4], "links": [["x", "y"]]}, "links", "not a link"),
        ({"servers": far, "cpu": [6, 6], "mem": [4, 4], "bw": 1}, "bw", "not a field of a move"),
        ({"servers": far, "cpu": [6, 6], "mem": [4, 4], "hold": 2}, "hold", "not a field of a move"),
        ({"servers": [far[0]], "cpu": [12], "mem": [8]}, "servers", "cannot run as listed"),
        ({"id": "b", "servers": far, "cpu": [6, 6], "mem": [4, 4]}, "id", "names job"),
    ):
        with pytest.raises(InputError) as err:
            e.move("a", row)
        assert err.value.field == field and words in err.value.detail, (row, err.value)
    with pytest.raises(NotFound):
        e.move("nope", split)
    with pytest.raises(InputError, match="moves twice") as err:
        e.moves([{"id": "a", **split}, {"id": "a", **split}])
    assert err.value.field == "moves[1].id"
    for bad in ([], {"id": "a"}, "a", [3]):
        with pytest.raises(InputError) as err:
            e.moves(bad)  # type: ignore[arg-type]
        assert err.value.field in ("moves", "moves[0]")
    assert e.job("a") == moved and e.counters["moved"] == 2
    e.release("a")
    e.close()
    trace = network_trace(db)
    assert list(trace.ids) == ["a", "b"]  # a move is no arrival


def test_a_swap_is_one_step_and_moves_records_it_together() -> None:
    """Two jobs that fill two servers trade places: neither fits alone while the other runs, so a client carries
    it out as one step (both stopped, both started) and tells ``moves`` at once; ``move`` of either alone is
    refused with nothing changed."""
    e = NetworkEngine(ALPHA, "tetris")
    n = ALPHA.node_names
    e.reconcile([{"id": "a", "servers": [n[0]], "cpu": [10], "mem": [6], "bw": 0.1},
                 {"id": "b", "servers": [n[1]], "cpu": [10], "mem": [6], "bw": 0.1}])  # fmt: skip
    before = _rows(e)
    with pytest.raises(InputError, match="cannot run") as err:
        e.move("a", {"servers": [n[1]], "cpu": [10], "mem": [6]})
    assert err.value.field == "servers" and _rows(e) == before
    done = e.moves([{"id": "a", "servers": [n[1]], "cpu": [10], "mem": [6]},
                    {"id": "b", "servers": [n[0]], "cpu": [10], "mem": [6]}])  # fmt: skip
    assert [(j.id, j.servers) for j in done] == [("a", (n[1],)), ("b", (n[0],))]
    e.check_invariants()
    assert e.counters["moved"] == 2


def test_a_reconcile_as_of_a_stale_inventory_leaves_what_changed_since_as_recorded(tmp_path: Path) -> None:
    """An inventory taken (or a plan made) before jobs were placed, moved or released: without ``as_of`` the
    reconcile releases the job placed meanwhile and records the ended one again (a review reproduced it over
    HTTP); with it, both are left as recorded and reported ``newer``. Needs the journal."""
    import time

    e = NetworkEngine.open(tmp_path / "n.db", ALPHA, "tetris")
    for i in range(4):
        e.place(NetJob(f"j{i}", 12, 8, 0.1))
    listing = [j.as_dict() for j in e.jobs()]
    taken = time.time()
    time.sleep(0.01)
    e.place(NetJob("meanwhile", 5, 5, 0.1))
    e.release("j1")
    dry = e.reconcile(listing, execute=False)
    assert dry.released == ("meanwhile",) and dry.recorded == ("j1",)  # what a stale inventory did
    rep = e.reconcile(listing, as_of=taken)
    assert (rep.released, rep.recorded, rep.changed, rep.newer) == ((), (), (), ("j1", "meanwhile"))
    assert rep.kept == 3 and {j.id for j in e.jobs()} == {"j0", "j2", "j3", "meanwhile"}
    plan = e.make_room(NetJob("n", 3, 3, 0.1))
    e.place(NetJob("after", 2, 2, 0.1))
    e.release("j0")
    rep = e.reconcile(list(plan.inventory), as_of=plan.at)  # the plan's inventory, once its moves are made
    assert rep.recorded == ("n",) and set(rep.newer) == {"after", "j0"} and "after" in {j.id for j in e.jobs()}
    for bad, words in ((time.time() + 3600, "after this host's clock"), (float("nan"), "must be a time")):
        with pytest.raises(InputError, match=words) as err:
            e.reconcile(listing, as_of=bad)
        assert err.value.field == "as_of"
    with pytest.raises(InputError, match="needs the journal"):
        NetworkEngine(ALPHA).reconcile([], as_of=taken)
    e.close()
    off = NetworkEngine.open(tmp_path / "n.db", ALPHA, "tetris", journal_keep=0)  # the journal off a while
    off.place(NetJob("unseen", 1, 1, 0.1))
    off.close()
    back = NetworkEngine.open(tmp_path / "n.db", ALPHA, "tetris", journal_keep=1_000)
    with pytest.raises(InputError, match="was off after that time") as err:
        back.reconcile([j.as_dict() for j in back.jobs()], as_of=taken)
    assert err.value.field == "as_of"
    for i in range(2_100):  # pruned past the time (1,000 kept, pruned every 1,000)
        back.place(NetJob(f"p{i}", 1, 1, 0.1))
        back.release(f"p{i}")
    with pytest.raises(InputError, match="no longer reaches back") as err:
        back.reconcile([j.as_dict() for j in back.jobs()], as_of=taken)
    back.close()


def test_max_together_passes_over_racks_whose_moves_need_a_joint_step() -> None:
    """With ``max_together=1`` every plan moves one job a step (a rack needing more is passed over, so a plan may be
    refused where the unlimited one is not); each plan still passes the checker; a bad value is one sentence."""
    singly = joint = refused = 0
    for e, job, plan, before in _refusals("tetris-bw", 5, n=200):
        if any(sum(m.step == s for m in plan.moves) > 1 for s in {m.step for m in plan.moves}):
            joint += 1
        one = e.make_room(job, max_together=1)
        if one.accepted:
            singly += 1
            assert len({m.step for m in one.moves}) == len(one.moves)
            request = {"id": job.id, "cpu": job.cpu, "mem": job.mem, "bw": job.bw}
            assert check_room_plan(e.topology, before, [], request, one.as_dict()) == []
            assert len(one.moves) >= len(plan.moves)  # the fewest moves of the racks it may take
        else:
            refused += 1
    assert joint and singly, (joint, singly, refused)
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(InputError) as err:
            NetworkEngine(ALPHA).make_room(NetJob("x", 1, 1, 0.1), max_together=bad)  # type: ignore[arg-type]
        assert err.value.field == "max_together"


def test_what_reviews_found_in_moves_stays_fixed(tmp_path: Path) -> None:
    """The checker refuses amounts a cluster cannot give (below 0, fractions) and names a malformed plan instead of
    raising; a move may not give a job more of a drained server; a move listing a job's servers in another order
    changes nothing; an executed plan keeps the policy's draws (a dry one puts them back); a file becomes layout 3
    only with its first move; an explanation of a running id shows the hold asked."""
    n = ALPHA.node_names
    jobs = [{"id": "b", "servers": [n[0], n[1]], "cpu": [5, 5], "mem": [5, 5], "links": [[n[0], n[40]], [n[1], n[40]]],
             "bw": 0.1}]  # fmt: skip
    request = {"id": "c", "cpu": 15, "mem": 1, "bw": 0.1}
    links = jobs[0]["links"] + [[n[2], n[40]]]
    bad = {"accepted": True, "moves": [{"id": "b", "from": [n[0], n[1]], "servers": [n[0], n[1], n[2]],
                                        "cpu": [-5, 10, 5], "mem": [5, 5, 0], "links": links, "step": 0}],
           "placement": {"id": "c", "servers": [n[0]], "cpu": [15], "mem": [1], "links": [], "bw": 0.1}}  # fmt: skip
    bad["inventory"] = [{**jobs[0], **{k: bad["moves"][0][k] for k in ("servers", "cpu", "mem", "links")}},
                        bad["placement"]]  # fmt: skip
    assert any("not a whole number" in p for p in check_room_plan(ALPHA, jobs, [], request, bad))
    half = copy.deepcopy(bad)
    half["moves"][0]["cpu"] = [4.5, 5.5, 0]
    assert any("not a whole number" in p for p in check_room_plan(ALPHA, jobs, [], request, half))
    assert check_room_plan(ALPHA, jobs, [], request, {"accepted": True, "moves": [{"id": "b"}]}) != []
    uneven = copy.deepcopy(bad)
    uneven["moves"][0]["cpu"] = [5, 5]
    assert any("do not match" in p for p in check_room_plan(ALPHA, jobs, [], request, uneven))

    db = tmp_path / "n.db"
    e = NetworkEngine.open(db, ALPHA, "tetris")
    e.reconcile([{"id": "a", "servers": [n[0], n[1]], "cpu": [3, 3], "mem": [2, 2], "bw": 0.1, "hold": 3}])
    e.drain_server(n[0])
    with pytest.raises(InputError, match="drained") as err:
        e.move("a", {"servers": [n[0], n[1]], "cpu": [6, 0], "mem": [2, 2]})
    assert err.value.field == "servers"
    e.move("a", {"servers": [n[0], n[1]], "cpu": [1, 5], "mem": [2, 2]})  # less of it is fine
    assert e.job("a").cpu == (1, 5)
    assert e.move("a", {"servers": [n[1], n[0]], "cpu": [5, 1], "mem": [2, 2]}).servers == (n[0], n[1])
    assert e.counters["moved"] == 1
    assert e.explain(NetJob("a", 2, 2, 0.1, hold=9)).placement.hold == 9
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 3  # the move made it 3
    e.close()
    fresh = tmp_path / "m.db"
    NetworkEngine.open(fresh, ALPHA).close()
    assert sqlite3.connect(fresh).execute("PRAGMA user_version").fetchone()[0] == 2  # none yet: still 2

    for execute in (False, True):
        job, plan = next((x[1], x[2]) for x in _refusals("random", 2) if x[2].moves)
        e = NetworkEngine(ALPHA, "random")
        e.reconcile([j for j in plan.inventory if j["id"] != job.id])  # the state before that plan
        before = e.policy.rng.bit_generator.state
        assert e.make_room(job, execute=execute).executed == execute
        assert (e.policy.rng.bit_generator.state == before) != execute


def test_a_time_limit_bounds_the_racks_tried_and_still_answers_a_checked_plan() -> None:
    """``time_limit_s``: racks are begun only within it; what is answered is the best plan of those tried (each
    checked), at least as many moves as the unlimited one, or none; a bad limit is one sentence."""
    found = 0
    for e, job, plan, before in _refusals("tetris-bw", 4, n=160):
        quick = e.make_room(job, time_limit_s=1e-9)  # the first rack with jobs, and no other
        found += quick.accepted
        if quick.accepted:
            assert len(quick.moves) >= len(plan.moves)
            request = {"id": job.id, "cpu": job.cpu, "mem": job.mem, "bw": job.bw}
            assert check_room_plan(e.topology, before, [], request, quick.as_dict()) == []
        else:
            assert quick.reason == "network" and not quick.moves
    assert found, "no plan from the first rack alone in this episode: choose another"
    for bad in (0, -1.0, float("nan"), 4000, True, "1"):
        with pytest.raises(InputError) as err:
            NetworkEngine(ALPHA).make_room(NetJob("x", 1, 1, 0.1), time_limit_s=bad)  # type: ignore[arg-type]
        assert err.value.field == "time_limit"
