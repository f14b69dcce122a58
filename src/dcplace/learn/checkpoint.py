"""Nara checkpoints: one ``torch.save`` file holding the format tag, the layer sizes, the weights and metadata.

Two kinds share the format: a *policy* file (weights + how it was trained; what ships in the package and what
``--checkpoint`` reads) and a *training* file (a policy file plus the optimiser state and the trainer's counters, for
``--resume``). Loading never unpickles code (``weights_only=True``), and every way a file can be wrong (missing,
not a checkpoint, another model's weights) ends in one :class:`~dcplace.errors.InputError` sentence.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import torch

from dcplace.atomic import atomic_path
from dcplace.errors import InputError
from dcplace.inputs import check_file
from dcplace.learn.nara_model import NaraConfig, NaraNet

FORMAT = "dcplace-nara"
VERSION = 1


def save(
    path: Path,
    net: NaraNet | torch.nn.Module,
    meta: dict[str, Any],
    extra: dict[str, Any] | None = None,
    fmt: str = FORMAT,
) -> None:
    """Write atomically (a half-written checkpoint never replaces a good one). ``net`` has a ``cfg.to_dict()``;
    ``fmt`` names the model family (Nara's by default; CVD-RL's is ``dcplace-cvd``)."""
    cfg = net.cfg.to_dict()  # type: ignore[union-attr,operator]
    blob = {"format": fmt, "version": VERSION, "config": cfg, "model": net.state_dict(), "meta": meta}
    if extra:
        blob.update(extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(blob, tmp)


def read(path: Path, fmt: str = FORMAT, what: str = "Nara") -> dict[str, Any]:
    """The raw checkpoint dictionary, validated to be ours and of model family ``fmt`` (called ``what``), its weights
    all finite (a NaN or infinite weight, from a damaged file or a diverged run, would act without a word)."""
    check_file(path, "checkpoint")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        kind = type(exc).__name__
        raise InputError(
            f"{path}: not a readable checkpoint (damaged, truncated or not a torch file: {kind})"
        ) from None
    if not isinstance(blob, dict) or blob.get("format") != fmt:
        raise InputError(f"{path}: not a dcplace {what} checkpoint (field 'format' is not {fmt!r})")
    if blob.get("version") != VERSION:
        raise InputError(f"{path}: field 'version' is {blob.get('version')!r}, this dcplace reads {VERSION}")
    for key in ("config", "model", "meta"):
        if not isinstance(blob.get(key), dict):
            raise InputError(f"{path}: field {key!r} is missing or not a mapping")
    for name, tensor in blob["model"].items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise InputError(f"weight {name!r} holds {bad} non-finite values (NaN or infinity): a damaged file or a "
                             "diverged run", path=path, field="model")  # fmt: skip
    return blob


def load(path: Path) -> tuple[NaraNet, dict[str, Any]]:
    """The network (in eval mode) and its metadata."""
    blob = read(path)
    try:
        cfg = NaraConfig(**blob["config"])
    except TypeError as exc:
        raise InputError(f"{path}: field 'config' does not describe a Nara model ({exc})") from None
    net = NaraNet(cfg)
    load_weights(path, net, blob["model"], "Nara")
    return net, blob["meta"]


def load_weights(path: Path, net: torch.nn.Module, got: dict[str, Any], what: str) -> None:
    """Load ``got`` into ``net`` (then eval mode), or say which weight is missing, extra or of the wrong shape."""
    expected = net.state_dict()
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    if missing or unexpected:
        which = f"missing weight {missing[0]!r}" if missing else f"unexpected weight {unexpected[0]!r}"
        raise InputError(f"{path}: field 'model' does not match the {what} network ({which})")
    for name, tensor in expected.items():
        if not isinstance(got[name], torch.Tensor) or got[name].shape != tensor.shape:
            shape = tuple(got[name].shape) if isinstance(got[name], torch.Tensor) else type(got[name]).__name__
            raise InputError(
                f"{path}: field 'model' weight {name!r} has shape {shape}, the network needs {tuple(tensor.shape)}"
            )
    net.load_state_dict(got)
    net.eval()


def shipped_path(topology: str, dataset: str) -> Path:
    """The checkpoint shipped in the package for an agent trained on ``topology`` with ``dataset`` requests."""
    return Path(str(files("dcplace") / "data" / "nara" / f"{topology}-{dataset}.pt"))


def shipped() -> list[Path]:
    root = Path(str(files("dcplace") / "data" / "nara"))
    return sorted(root.glob("*.pt")) if root.is_dir() else []
