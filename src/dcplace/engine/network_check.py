"""An independent check of a network engine's plan to make room (:meth:`NetworkEngine.make_room`).

It reads only what a client sees: the topology's capacities, the running jobs as ``GET /jobs`` lists them (server
and link *names*, amounts, link units), the drained servers, and the plan as ``POST /network/make-room`` answers it.
It shares no code with the planner (which works on the simulator's arrays): its own tallies per server and link name,
its own test that a job's links join its servers. :meth:`~dcplace.engine.network.NetworkEngine.make_room` runs it on
every plan before answering (a failure is a bug: RuntimeError), and the tests run it on plans mutated by hand.

A plan is checked as it is carried out, **cold**, step by step: the jobs a step moves (its ``step`` number; one job
alone, or several that need each other's room) are all stopped where they run, then started where their moves say
(their old servers and links free before the new ones are taken); then the new job is started. A plan passes when

- every move is of a job running now, from the servers it runs on, with its CPU, memory and bandwidth unchanged,
  each job moved once, the steps in order;
- after each step no server gives more CPU or memory than it has and no link carries more than its capacity;
- no move or new job takes any part of a drained server;
- every placement's links join all its servers (a job on one server needs none) and name links of the topology,
  and its amounts are whole numbers of units, none below 0;
- the new job takes what it asks (``cpu``, ``mem``, ``bw`` of the request), and
- ``inventory`` is every job as it runs after the moves, the new one included, and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dcplace.cluster.topology import BW_SCALE, Topology

__all__ = ["check_room_plan"]


def _micro(bw: float) -> int:
    return round(float(bw) * BW_SCALE)


def _total(amounts: Sequence[Any]) -> int | None:
    """The sum of whole amounts (None where one is not a whole number: :func:`check_room_plan` names it)."""
    return sum(amounts) if all(type(x) is int for x in amounts) else None


def _joined(servers: Sequence[str], links: Sequence[Sequence[str]]) -> bool:
    """Whether ``links`` (pairs of node names) form one piece holding every server (networkx's connectivity)."""
    import networkx as nx

    if not all(len(pair) == 2 for pair in links):
        raise ValueError("a link is not a pair of node names")  # named as a plan not well formed
    g = nx.Graph()
    g.add_nodes_from(servers)
    g.add_edges_from(tuple(pair) for pair in links)
    return bool(nx.number_connected_components(g) <= 1)


def check_room_plan(
    topology: Topology,
    jobs: Sequence[Mapping[str, Any]],
    drained: Sequence[str],
    request: Mapping[str, Any],
    plan: Mapping[str, Any],
) -> list[str]:
    """The problems of ``plan`` (a :class:`~dcplace.engine.network.NetRoomPlan` as a dict) for the job
    ``request`` (``id``, ``cpu``, ``mem``, ``bw``) on ``topology`` running ``jobs`` (``GET /jobs`` rows) with
    ``drained`` servers, carried out cold (module docstring): one sentence each, none for a sound plan. A plan that
    does not accept the job is sound when it moves nothing and lists no inventory; one that is not shaped as a plan
    (a field missing, a list that is not one) is one problem."""
    problems: list[str] = []
    try:
        _check(topology, jobs, drained, request, plan, problems)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # what was found before it, and this
        problems.append(f"the plan is not well formed ({type(e).__name__}: {e})")
    return problems


def _check(
    topology: Topology,
    jobs: Sequence[Mapping[str, Any]],
    drained: Sequence[str],
    request: Mapping[str, Any],
    plan: Mapping[str, Any],
    problems: list[str],
) -> None:
    names = topology.node_names
    cpu_cap = {names[v]: int(topology.server_cpu[v]) for v in range(topology.n_servers)}
    mem_cap = {names[v]: int(topology.server_mem[v]) for v in range(topology.n_servers)}
    link_cap: dict[frozenset[str], int] = {}
    for e in range(topology.n_links):
        link_cap[frozenset((names[int(topology.link_u[e])], names[int(topology.link_v[e])]))] = int(
            topology.link_cap[e]
        )
    if not plan.get("accepted"):
        if plan.get("moves") or plan.get("inventory"):
            problems.append("a refused plan moves or lists jobs")
        return
    cpu = {s: 0 for s in cpu_cap}  # what is given, by server and link name
    mem = {s: 0 for s in mem_cap}
    bw = {k: 0 for k in link_cap}
    running: dict[str, Mapping[str, Any]] = {}

    def take(row: Mapping[str, Any], sign: int, what: str) -> None:
        if not len(row["servers"]) == len(row["cpu"]) == len(row["mem"]):
            return  # named by sound()
        for s, c, m in zip(row["servers"], row["cpu"], row["mem"], strict=True):
            if type(c) is not int or type(m) is not int:
                continue  # named by sound()
            if s not in cpu_cap:
                problems.append(f"{what}: {s!r} is not a server")
                continue
            cpu[s] += sign * int(c)
            mem[s] += sign * int(m)
        for pair in row["links"]:
            key = frozenset(pair)
            if key not in link_cap or len(key) != 2:
                problems.append(f"{what}: {pair!r} is not a link")
                continue
            bw[key] += sign * _micro(row["bw"])

    def over(what: str) -> None:
        problems.extend(f"{what}: server {s} gives {cpu[s]} CPU of {cpu_cap[s]}" for s in cpu if cpu[s] > cpu_cap[s])
        problems.extend(f"{what}: server {s} gives {mem[s]} memory of {mem_cap[s]}" for s in mem if mem[s] > mem_cap[s])
        problems.extend(f"{what}: link {'-'.join(sorted(k))} carries {bw[k]} of {link_cap[k]} micro-units"
                        for k in bw if bw[k] > link_cap[k])  # fmt: skip

    def sound(row: Mapping[str, Any], what: str) -> None:
        if not len(row["servers"]) == len(row["cpu"]) == len(row["mem"]) or not row["servers"]:
            problems.append(f"{what}: servers, cpu and mem do not match")
        if not all(type(x) is int and x >= 0 for x in (*row["cpu"], *row["mem"])):
            problems.append(f"{what}: an amount is not a whole number of units from 0 (a server cannot give back)")
        if len(set(row["servers"])) != len(row["servers"]):
            problems.append(f"{what}: a server twice")
        if len({frozenset(p) for p in row["links"]}) != len(row["links"]):
            problems.append(f"{what}: a link twice")
        if not _joined(row["servers"], row["links"]):
            problems.append(f"{what}: its links do not join its servers")
        taken = [s for s in row["servers"] if s in drained]
        if taken:
            problems.append(f"{what}: takes drained server {taken[0]}")

    for job in jobs:
        running[job["id"]] = job
        take(job, 1, f"job {job['id']}")
    over("before the plan")  # a listing that is itself over capacity is not the plan's fault, but says so
    moved: set[str] = set()
    moves = list(plan.get("moves", ()))
    steps = [int(m.get("step", i)) for i, m in enumerate(moves)]
    if steps != sorted(steps):
        problems.append(f"the moves' steps are not in order: {steps}")
    for step in sorted(set(steps)):
        group = [(i, m) for i, m in enumerate(moves) if steps[i] == step]
        started = []
        for i, move in group:  # every job of the step stopped first
            what = f"move {i} ({move['id']})"
            was = running.get(move["id"])
            if was is None:
                problems.append(f"{what}: no such job runs")
                continue
            if move["id"] in moved:
                problems.append(f"{what}: the job moves twice")
                continue
            moved.add(move["id"])
            if list(move["from"]) != list(was["servers"]):
                problems.append(f"{what}: it runs on {was['servers']}, not {move['from']}")
            now = {**was, "servers": move["servers"], "cpu": move["cpu"], "mem": move["mem"], "links": move["links"]}
            sound(now, what)
            if (_total(now["cpu"]), _total(now["mem"])) != (_total(was["cpu"]), _total(was["mem"])):
                problems.append(f"{what}: changes the job's CPU or memory")
            take(was, -1, what)
            started.append((what, now))
        for what, now in started:  # then started where they go
            take(now, 1, what)
            running[now["id"]] = now
        over(f"after step {step}")
    placement = plan.get("placement")
    if placement is None:
        problems.append("an accepted plan has no placement")
        return
    what = f"job {request['id']}"
    if placement["id"] != request["id"] or request["id"] in running:
        problems.append(f"{what}: the placement is of {placement['id']!r}, or the job runs already")
    if (_total(placement["cpu"]), _total(placement["mem"]), _micro(placement["bw"])) != (
        int(request["cpu"]),
        int(request["mem"]),
        _micro(request["bw"]),
    ):
        problems.append(f"{what}: the placement does not take what the job asks")
    sound(placement, what)
    take(placement, 1, what)
    over(f"after starting {what}")
    running[placement["id"]] = placement

    def key(row: Mapping[str, Any]) -> tuple[Any, ...]:
        parts = sorted(zip(row["servers"], row["cpu"], row["mem"], strict=True))
        return (parts, sorted(sorted(p) for p in row["links"]), _micro(row["bw"]))

    listed = {row["id"]: row for row in plan.get("inventory", ())}
    if len(listed) != len(plan.get("inventory", ())):
        problems.append("the inventory lists a job twice")
    if set(listed) != set(running):
        problems.append(f"the inventory lists {len(listed)} jobs, {len(set(listed) ^ set(running))} of them not "
                        "or not only those running after the plan")  # fmt: skip
    problems.extend(f"the inventory has job {j} elsewhere than the plan leaves it"
                    for j in set(listed) & set(running) if key(listed[j]) != key(running[j]))  # fmt: skip
    return
