"""kube-scheduler's HTTP extender convention: ``filter``, ``prioritize`` and ``bind`` over the engine.

With this service configured as an extender (``KubeSchedulerConfiguration.extenders``: ``urlPrefix:
http://HOST:PORT/extender``, ``filterVerb: filter``, ``prioritizeVerb: prioritize``, ``weight``,
``nodeCacheCapable``; ``bindVerb: bind`` only with a binder, below; docs/engine.md has the stanza), the Kubernetes
scheduler asks (the types of ``k8s.io/kube-scheduler/extender/v1``):

* ``POST /extender/filter`` with ``ExtenderArgs`` (``Pod``, and ``NodeNames`` when ``nodeCacheCapable`` else
  ``Nodes.items``): the answer (``ExtenderFilterResult``) keeps the nodes the engine finds feasible, as
  ``NodeNames`` or as ``Nodes`` (the node objects, the only field the scheduler reads in that mode), and gives every
  other one its reason: ``FailedNodes`` for capacity (cpu, mem, numa), which preemption may cure, and
  ``FailedAndUnresolvableNodes`` for a drained, failed or unregistered node, which it cannot;
* ``POST /extender/prioritize``: ``HostPriorityList``, the policy's order as scores from 10 (its best) down to 1
  (``MaxExtenderPriority`` is 10), 0 for nodes it would not use;
* ``POST /extender/bind`` (``ExtenderBindingArgs``: pod name, namespace, UID, node): the engine records the pod on
  that node (the NUMA node the policy ranks best there), durably, so its ledger stays the cluster's. Idempotent: a
  retry of a recorded bind succeeds. The binding arguments carry no resources, so the requests come from the pod's
  last ``filter`` call in this process, with the same UID (the most recent 10,000 pods are remembered in memory:
  after a restart, or on another replica, a bind before a new filter is refused). With ``bindVerb`` the scheduler
  leaves the binding to the extender: the Binding object in the API server must be created by the deployment (a
  small controller); this library does not call the API server.

A pod's request is kube-scheduler's (:func:`pod_requests`: containers, init containers and sidecars, overhead,
pod-level requests; limits where requests are absent), in Kubernetes quantities (:data:`_QTY`: ``500m``, ``4Gi``,
``1e9``, ...; memory taken in GiB = the engine's GB unit); the annotation ``dcplace.io/multi-numa: "true"`` makes it
multi-NUMA. Node names are the engine's machine ids.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from typing import Any

from fastapi import FastAPI, Response

from dcplace.engine import PlacementEngine, VmRequest, check_id
from dcplace.errors import InputError, PolicyError
from dcplace.service.models import ExtenderBindingResult, ExtenderFilterResult, HostPriority

MAX_PRIORITY = 10
_SUFFIX = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}  # fmt: skip
_QTY = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$")
"""Kubernetes' quantity grammar (apimachinery's resource/quantity.go): a signed decimal (``1``, ``1.``, ``.5``,
``+1``), then a binary suffix (Ki .. Ei), a decimal one (n, u, m, k, M, G, T, P, E) or a decimal exponent
(``1e9``, ``129e6``: how a pod written ``memory: 1e9`` reaches the extender)."""


def quantity(value: Any, what: str) -> float:
    """A Kubernetes quantity as a number: cores for ``cpu``, GiB for ``memory``."""
    m = _QTY.match(str(value).strip())
    if m is None:
        raise InputError(f"is not a Kubernetes quantity: {value!r}", field=what)
    try:  # an exponent of 400 overflowed, one of 5,000 digits is more than int() reads: both were 500s
        x = float(m.group(1)) * (10.0 ** int(m.group(2)[1:]) if m.group(2) else _SUFFIX[m.group(3) or ""])
    except (OverflowError, ValueError):
        x = math.inf
    if not math.isfinite(x):
        raise InputError(f"is too large a quantity: {str(value)[:40]!r}", field=what)
    if x < 0:
        raise InputError(f"must not be negative: {value!r}", field=what)
    return x if what == "cpu" else x / 2.0**30


def pod_requests(pod: dict[str, Any]) -> tuple[float, float]:
    """(cores, GiB) a pod asks for, as kube-scheduler computes it (component-helpers' ``PodRequests``): the sum of
    its containers; an init container runs alone before them (with the sidecars started before it), so the pod
    needs the larger of that and the containers with every sidecar (an init container with ``restartPolicy:
    Always``); then ``overhead`` is added. Pod-level ``spec.resources.requests`` replace the containers' where set.
    A container with limits and no requests asks its limits (the API server's defaulting)."""
    spec = _obj(pod.get("spec"), "Pod.spec")

    def asks(c: Any, where: str) -> tuple[float, float]:
        res = _obj(_obj(c, where).get("resources"), f"{where}.resources")
        req = _obj(res.get("requests"), f"{where}.resources.requests")
        lim = _obj(res.get("limits"), f"{where}.resources.limits")
        return (quantity(req.get("cpu", lim.get("cpu", "0")), "cpu"),
                quantity(req.get("memory", lim.get("memory", "0")), "memory"))  # fmt: skip

    cpu = mem = 0.0
    for i, c in enumerate(_seq(spec.get("containers"), "Pod.spec.containers")):
        a, b = asks(c, f"Pod.spec.containers[{i}]")
        cpu, mem = cpu + a, mem + b
    side_cpu = side_mem = init_cpu = init_mem = 0.0
    for i, c in enumerate(_seq(spec.get("initContainers"), "Pod.spec.initContainers")):
        a, b = asks(c, f"Pod.spec.initContainers[{i}]")
        if _obj(c, f"Pod.spec.initContainers[{i}]").get("restartPolicy") == "Always":  # a sidecar: runs on
            side_cpu, side_mem = side_cpu + a, side_mem + b
            init_cpu, init_mem = max(init_cpu, side_cpu), max(init_mem, side_mem)
        else:
            init_cpu, init_mem = max(init_cpu, a + side_cpu), max(init_mem, b + side_mem)
    cpu, mem = max(cpu + side_cpu, init_cpu), max(mem + side_mem, init_mem)
    level = _obj(_obj(spec.get("resources"), "Pod.spec.resources").get("requests"), "Pod.spec.resources.requests")
    if "cpu" in level:
        cpu = quantity(level["cpu"], "cpu")
    if "memory" in level:
        mem = quantity(level["memory"], "memory")
    over = _obj(spec.get("overhead"), "Pod.spec.overhead")
    return cpu + quantity(over.get("cpu", "0"), "cpu"), mem + quantity(over.get("memory", "0"), "memory")


def _obj(value: Any, field: str) -> dict[str, Any]:
    """``value`` as a JSON object (absent: empty), or an InputError naming ``field``: a malformed pod is the
    caller's mistake, answered in one sentence (it was a 500 from ``.get`` on a string)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"must be an object, got {type(value).__name__}", field=field)
    return value


def _seq(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"must be a list, got {type(value).__name__}", field=field)
    return value


def pod_request(pod: Any) -> VmRequest:
    """The VM request of a pod (module docstring); a malformed pod is an InputError naming the field."""
    pod = _obj(pod, "Pod")
    meta = _obj(pod.get("metadata"), "Pod.metadata")
    cpu, mem = pod_requests(pod)
    annotations = _obj(meta.get("annotations"), "Pod.metadata.annotations")
    multi = str(annotations.get("dcplace.io/multi-numa", "")).lower() == "true"
    name = check_id(f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}", "Pod.metadata.name")
    # A pod without requests asks for a token amount (the engine needs positive demands).
    return VmRequest(name, max(cpu, 1e-3), max(mem, 1e-3), multi)


def _node_names(args: dict[str, Any]) -> list[str]:
    names = args.get("NodeNames")
    if names is not None:
        return [str(n) for n in _seq(names, "NodeNames")]
    return [str(_obj(_obj(n, f"Nodes.items[{i}]").get("metadata"), f"Nodes.items[{i}].metadata").get("name"))
            for i, n in enumerate(_node_items(args))]  # fmt: skip


def _node_items(args: dict[str, Any]) -> list[Any]:
    return _seq(_obj(args.get("Nodes"), "Nodes").get("items"), "Nodes.items")


UNRESOLVABLE = ("drained", "failed", "not registered with dcplace")
"""Reasons no preemption can cure: sent as ``FailedAndUnresolvableNodes`` (kube-scheduler then does not evict pods
there for this one); capacity reasons (cpu, mem, numa) go to ``FailedNodes``."""


def add_extender_routes(app: FastAPI, engine: PlacementEngine) -> None:
    seen: OrderedDict[str, tuple[VmRequest, str]] = OrderedDict()  # pod id -> its request and UID, for bind
    seen_lock = threading.Lock()  # the routes run in the thread pool: an eviction could race a move_to_end

    @app.post("/extender/filter", tags=["kubernetes"], response_model=ExtenderFilterResult)
    def extender_filter(args: dict[str, Any]) -> Response:
        """kube-scheduler extender filter: feasible nodes, and the reason for every other. In ``Nodes`` mode
        (``nodeCacheCapable: false``) the kept nodes come back as ``Nodes`` (the scheduler reads only that field
        then), in ``NodeNames`` mode as ``NodeNames``."""
        by_name = args.get("NodeNames") is None
        engine.check_store()  # a failed database: 503, as bind answers (it filtered on uncommitted memory)
        try:
            names = _node_names(args)
            pod = _obj(args.get("Pod"), "Pod")
            req = pod_request(pod)
            uid = str(_obj(pod.get("metadata"), "Pod.metadata").get("uid", ""))
            if len(uid) > 256:  # kept for bind: a 20 MB one stayed in memory
                raise InputError(f"must be at most 256 characters, got {len(uid)}", field="Pod.metadata.uid")
            verdict, _ = engine.assess(req)
            with seen_lock:
                seen[req.id] = (req, uid)
                seen.move_to_end(req.id)
                if len(seen) > 10_000:
                    seen.popitem(last=False)
        except InputError as e:
            return _answer({"NodeNames": [], "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": str(e)})
        keep: list[int] = []
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for i, name in enumerate(names):
            v = verdict.get(name, "not registered with dcplace")
            if v == "feasible":
                keep.append(i)
            else:
                (unresolvable if v in UNRESOLVABLE else failed)[name] = f"dcplace: {v}"
        out: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
        if by_name:
            items = _node_items(args)
            out |= {"Nodes": {"items": [items[i] for i in keep]}, "NodeNames": None}
        else:
            out |= {"Nodes": None, "NodeNames": [names[i] for i in keep]}
        return _answer(out)

    @app.post("/extender/prioritize", tags=["kubernetes"], response_model=list[HostPriority])
    def extender_prioritize(args: dict[str, Any]) -> Response:
        """kube-scheduler extender prioritize: the policy's order as scores 10 (best) .. 1, 0 if not ranked."""
        names = _node_names(args)  # malformed: a 422 (a priority list has no field for an error)
        engine.check_store()
        try:
            _, ranked = engine.assess(pod_request(args.get("Pod")))
        except PolicyError:
            raise  # the policy's own failure: a 422 saying so (all-zero scores with 200 hid it)
        except InputError:  # a pod the filter already refused with its Error: no preference
            return _answer([{"Host": n, "Score": 0} for n in names])
        order = list(dict.fromkeys(machine for machine, _node, _score in ranked))  # a list's `in`: O(M^2)
        pos = {m: i for i, m in enumerate(order)}
        last = max(len(order) - 1, 1)  # the best gets 10, the last ranked 1 (it got 2 with many nodes)
        scores = [(MAX_PRIORITY - (MAX_PRIORITY - 1) * pos[h] // last) if h in pos else 0 for h in names]
        return _answer([{"Host": h, "Score": score} for h, score in zip(names, scores, strict=True)])

    @app.post("/extender/bind", tags=["kubernetes"], response_model=ExtenderBindingResult)
    def extender_bind(args: dict[str, Any]) -> Response:
        """kube-scheduler extender bind: record the pod on the chosen node (the policy's best NUMA node there).
        Idempotent: a retry of a bind already recorded on that node succeeds (the scheduler retries after its
        timeout). The pod must have been filtered by this process, with the same ``PodUID``, which is recorded as
        the VM's uid: a new pod under a name whose old pod is still recorded is refused until that one is
        released (``DELETE /vms/{namespace/name}?uid=<old UID>`` frees only the old one)."""
        pod_id = f"{args.get('PodNamespace', 'default')}/{args.get('PodName', '?')}"
        node, uid = str(args.get("Node", "")), str(args.get("PodUID", "") or "")
        with seen_lock:
            known = seen.get(pod_id)
        if known is None:
            return _answer({"Error": f"dcplace: pod {pod_id} was not filtered by this extender, so its requests are "
                                     "unknown"})  # fmt: skip
        r, filtered_uid = known
        if uid and filtered_uid and uid != filtered_uid:
            return _answer({"Error": f"dcplace: pod {pod_id} has UID {uid}, but the one filtered had {filtered_uid}"})
        try:  # the engine checks, chooses the node and records in one step (PlacementEngine.bind); the pod's UID
            # goes with it, so a pod recreated under its old name is not taken for the old one's retry
            engine.bind(VmRequest(pod_id, r.cpu, r.mem, r.multi, uid=uid or filtered_uid or None), node)
        except InputError as e:  # on another node, does not fit, a node drained, failed or unknown
            return _answer({"Error": f"dcplace: {e.detail}"})
        return _answer({"Error": ""})


def _answer(out: Any) -> Response:
    """An extender answer as JSON, written with the standard encoder: the framework's serializer stopped at depth 100
    (the filter echoes the scheduler's own node objects back) and could not encode a lone surrogate (a name the
    scheduler sent, echoed in an error): both were 500s. ``json.dumps`` escapes it as ``\\ud800``, as it came."""
    try:
        body = json.dumps(out)
    except RecursionError:
        body = json.dumps({"NodeNames": [], "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                           "Error": "Nodes.items: a node object is nested too deeply to echo back"})  # fmt: skip
    return Response(body, media_type="application/json")
