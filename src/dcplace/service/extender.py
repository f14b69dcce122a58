"""kube-scheduler's HTTP extender convention: ``filter``, ``prioritize`` and ``bind`` over the engine.

With this service configured as an extender (``KubeSchedulerConfiguration.extenders``: ``urlPrefix:
http://HOST:PORT/extender``, ``filterVerb: filter``, ``prioritizeVerb: prioritize``, ``bindVerb: bind``,
``weight: 1``, ``nodeCacheCapable: true``; docs/engine.md has the full stanza), the Kubernetes scheduler asks:

* ``POST /extender/filter`` with ``ExtenderArgs`` (``Pod``, ``NodeNames`` or ``Nodes.items``): the answer
  (``ExtenderFilterResult``) keeps the nodes the engine finds feasible and gives every other one its reason in
  ``FailedNodes`` (cpu, mem, numa, drained, failed; a node the engine does not know is "not registered");
* ``POST /extender/prioritize``: ``HostPriorityList``, the policy's order as scores from 10 (its best) down to 1
  (``MaxExtenderPriority`` is 10), 0 for nodes it would not use;
* ``POST /extender/bind`` (``ExtenderBindingArgs``: pod name, namespace, node): the engine records the pod on that
  node (the NUMA node the policy ranks best there), durably, so its ledger stays the cluster's. The binding
  arguments carry no resources, so the requests come from the pod's last ``filter`` call (the most recent 10,000
  pods are remembered). (The extender that binds must also create
  the Binding object in the API server; that call is the deployment's, not this library's.)

A pod's request is the sum of its containers' ``resources.requests`` (``cpu`` in cores or millicores ``500m``,
``memory`` in bytes or with a suffix, taken as GiB = the engine's GB unit); the annotation
``dcplace.io/multi-numa: "true"`` makes it multi-NUMA. Node names are the engine's machine ids.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from fastapi import FastAPI

from dcplace.engine import PlacementEngine, VmRequest
from dcplace.errors import InputError

MAX_PRIORITY = 10
_SUFFIX = {
    "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}  # fmt: skip
_QTY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


def quantity(value: Any, what: str) -> float:
    """A Kubernetes quantity as a number: cores for ``cpu``, GiB for ``memory``."""
    m = _QTY.match(str(value).strip())
    if m is None:
        raise InputError(f"is not a Kubernetes quantity: {value!r}", field=what)
    x, suffix = float(m.group(1)), m.group(2) or ""
    if what == "cpu":
        return x / 1000.0 if suffix == "m" else x * _SUFFIX.get(suffix, 1.0)
    if suffix == "m":
        return x / 1000.0 / 2.0**30
    return x * _SUFFIX[suffix] / 2.0**30


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
    cpu = mem = 0.0
    for i, c in enumerate(_seq(_obj(pod.get("spec"), "Pod.spec").get("containers"), "Pod.spec.containers")):
        where = f"Pod.spec.containers[{i}]"
        req = _obj(_obj(_obj(c, where).get("resources"), f"{where}.resources").get("requests"),
                   f"{where}.resources.requests")  # fmt: skip
        cpu += quantity(req.get("cpu", "0"), "cpu")
        mem += quantity(req.get("memory", "0"), "memory")
    annotations = _obj(meta.get("annotations"), "Pod.metadata.annotations")
    multi = str(annotations.get("dcplace.io/multi-numa", "")).lower() == "true"
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    # A pod without requests asks for a token amount (the engine needs positive demands).
    return VmRequest(name, max(cpu, 1e-3), max(mem, 1e-3), multi)


def _node_names(args: dict[str, Any]) -> list[str]:
    names = args.get("NodeNames")
    if names is not None:
        return [str(n) for n in _seq(names, "NodeNames")]
    items = _seq(_obj(args.get("Nodes"), "Nodes").get("items"), "Nodes.items")
    return [str(_obj(_obj(n, f"Nodes.items[{i}]").get("metadata"), f"Nodes.items[{i}].metadata").get("name"))
            for i, n in enumerate(items)]  # fmt: skip


def add_extender_routes(app: FastAPI, engine: PlacementEngine) -> None:
    seen: OrderedDict[str, VmRequest] = OrderedDict()  # pod id -> its request, from filter, for bind

    @app.post("/extender/filter", tags=["kubernetes"])
    def extender_filter(args: dict[str, Any]) -> dict[str, Any]:
        """kube-scheduler extender filter: feasible nodes, and the reason for every other."""
        try:
            names = _node_names(args)
            req = pod_request(args.get("Pod"))
            verdict, _ = engine.assess(req)
            seen[req.id] = req
            if len(seen) > 10_000:
                seen.popitem(last=False)
        except InputError as e:
            return {"NodeNames": [], "FailedNodes": {}, "Error": str(e)}
        keep, failed = [], {}
        for name in names:
            v = verdict.get(name, "not registered with dcplace")
            if v == "feasible":
                keep.append(name)
            else:
                failed[name] = f"dcplace: {v}"
        return {"NodeNames": keep, "FailedNodes": failed, "Error": ""}

    @app.post("/extender/prioritize", tags=["kubernetes"])
    def extender_prioritize(args: dict[str, Any]) -> list[dict[str, Any]]:
        """kube-scheduler extender prioritize: the policy's order as scores 10 (best) .. 1, 0 if not ranked."""
        names = _node_names(args)  # malformed: a 422 (a priority list has no field for an error)
        try:
            _, ranked = engine.assess(pod_request(args.get("Pod")))
        except InputError:
            return [{"Host": n, "Score": 0} for n in names]
        order: list[str] = []
        for machine, _node, _score in ranked:
            if machine not in order:
                order.append(machine)
        pos = {m: i for i, m in enumerate(order)}
        n = max(len(order), 1)
        return [
            {"Host": h, "Score": (MAX_PRIORITY - (MAX_PRIORITY - 1) * pos[h] // n) if h in pos else 0} for h in names
        ]

    @app.post("/extender/bind", tags=["kubernetes"])
    def extender_bind(args: dict[str, Any]) -> dict[str, Any]:
        """kube-scheduler extender bind: record the pod on the chosen node (the policy's best NUMA node there)."""
        pod_id = f"{args.get('PodNamespace', 'default')}/{args.get('PodName', '?')}"
        node = str(args.get("Node", ""))
        r = seen.get(pod_id)
        if r is None:
            return {"Error": f"dcplace: pod {pod_id} was not filtered by this extender, so its requests are unknown"}
        try:
            _, ranked = engine.assess(r)
            numa = next((k for m, k, _ in ranked if m == node), -2)
            if numa == -2:
                return {"Error": f"dcplace: pod {pod_id} does not fit on node {node}"}
            engine.assign(pod_id, node, numa, r.cpu, r.mem)
        except InputError as e:
            return {"Error": str(e)}
        return {"Error": ""}
