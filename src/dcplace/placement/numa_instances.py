"""Named topology-aware batches: what ``dcplace solve --instance`` accepts for a
:class:`~dcplace.placement.numa_batch.NumaBatch`.

* ``huawei-c1`` .. ``huawei-c5``: a sequence of the Huawei dataset in the shared data folder;
* ``huawei-heldout-1`` .. ``-4``: the fixed held-out sequences (:data:`~dcplace.placement.numa_generator.HELD_OUT`),
  ``huawei-gen-<seed>``: any other seed, both drawn by :func:`~dcplace.placement.numa_generator.generate` from the
  family of C1-C4's servers and requests;
* ``.../VM_data_C<n>.csv``: a sequence with ``PM_res.csv`` and ``topology.csv`` beside it (the dataset's layout).

A module of its own because it sits above both the reader (:mod:`.numa_batch`) and the generator, which uses the
pattern model (:mod:`.numa_pattern`, which builds on the reader): imports go one way.
"""

from __future__ import annotations

import re
from pathlib import Path

from dcplace.errors import InputError
from dcplace.placement.numa_batch import NumaBatch, huawei_folder, read_huawei
from dcplace.placement.numa_generator import HELD_OUT, generate

GENERATED = re.compile(r"huawei-(heldout|gen)-(\d{1,18})")
"""``huawei-heldout-N`` (a fixed held-out seed) or ``huawei-gen-SEED`` (any seed)."""


def is_numa_batch(spec: str) -> bool:
    """Whether ``--instance`` names a topology-aware batch (module docstring)."""
    return (bool(re.fullmatch(r"huawei-c[1-5]", spec)) or bool(GENERATED.fullmatch(spec))
            or bool(re.fullmatch(r"VM_data_C\d+\.csv", Path(spec).name)))  # fmt: skip


def load_numa_batch(spec: str) -> NumaBatch:
    """The batch ``spec`` names (module docstring)."""
    gen = GENERATED.fullmatch(spec)
    if gen:
        kind, number = gen.group(1), int(gen.group(2))
        if kind == "heldout" and number not in HELD_OUT:
            raise InputError(f"the held-out sequences are huawei-heldout-1 .. -{len(HELD_OUT)}, got {spec}",
                             field="instance")  # fmt: skip
        pool = [read_huawei(huawei_folder(spec), c) for c in (1, 2, 3, 4)]
        seed = HELD_OUT[number] if kind == "heldout" else number
        return generate(pool[0].node_free, pool[0].rack, pool, seed, name=spec)
    if spec.startswith("huawei-c"):
        return read_huawei(huawei_folder(spec), int(spec[-1]))
    path = Path(spec)
    return read_huawei(path.parent, 0, name=spec, vm_path=path)
