"""Commands whose options come from a typed config (see :mod:`dcplace.config`), and the one error handler.

:func:`config_command` turns a function ``run(cfg, **extra)`` into a typer command with

* one option per scalar field of the config class (nested configs included): the flag is the field's name with
  dashes (``max_pms`` -> ``--max-pms``), the help its docstring, the default its default; ``Literal`` fields take
  one of their values, ``bool`` fields are ``--x/--no-x``, tuples take their items after the flag;
* ``--config FILE.toml``: the file's values replace the defaults, flags given on the command line replace the file's;
* ``--force``: run even when a size guard (:mod:`dcplace.limits`) estimates more memory than the machine has;
* the function's own (non-config) options, such as ``--json`` or ``--out`` (an ``--out`` that names an existing
  file, not a folder, is refused before the run).

The function receives the resolved, validated config. :func:`handle_input_errors` (applied by ``config_command``,
usable alone) ends a command that raises :class:`~dcplace.errors.InputError` with one sentence on stderr and exit
code 2; an error naming a config field is worded with its flag when the value came from a flag or a default (``--pms
must be at least 1, got 0``), and with the file and its dotted key when it came from ``--config``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import inspect
import os
import shlex
import shutil
import tempfile
import tomllib
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

import typer

from dcplace import config, limits
from dcplace.atomic import unwritable
from dcplace.cli.outputs import ASSIGNMENT_SUFFIXES, EPISODE_SUFFIXES
from dcplace.errors import InputError

C = TypeVar("C")
P = ParamSpec("P")

CONFIG_HELP = "a TOML file of these settings (a run's config.toml repeats it); flags given here override it"
FORCE_HELP = "run even when the size guards estimate more memory than this machine has (docs/errors.md)"


@dataclasses.dataclass(frozen=True)
class Flag:
    """How one config field appears on the command line, where the defaults do not fit."""

    name: str | None = None
    """The flag (``--filter``); default: the field name with dashes."""
    help: str | None = None
    """Help text; default: the field's docstring."""
    parse: Callable[[str], Any] | None = None
    """The flag takes one string, turned into the field's value by this (raising InputError on a bad one)."""
    show: Callable[[Any], str] | None = None
    """With ``parse``: the field's default as the flag would spell it."""
    skip: bool = False
    """No flag: the field is set by ``--config`` or keeps its default (for fields that only code or a file sets)."""


def flag_name(key: str) -> str:
    """``scenario.max_pms`` -> ``--max-pms`` (the last part of the dotted key)."""
    return "--" + key.rsplit(".", 1)[-1].replace("_", "-")


@dataclasses.dataclass(frozen=True)
class _Option:
    """One generated option: the Python parameter, the config leaf it sets and how."""

    param: str
    leaf: config.Leaf
    flag: str
    parse: Callable[[str], Any] | None


def _options(cls: type, flags: Mapping[str, Flag]) -> list[tuple[_Option, inspect.Parameter]]:
    out: list[tuple[_Option, inspect.Parameter]] = []
    seen: dict[str, str] = {}
    for leaf in config.leaves(cls):
        tables = (".".join(leaf.path[:n]) for n in range(len(leaf.path), 0, -1))  # the key, then its tables
        spec = next((flags[k] for k in tables if k in flags), None) or flags.get(leaf.path[-1]) or Flag()
        if spec.skip:
            continue
        name = spec.name or flag_name(leaf.key)
        if name in seen:
            raise TypeError(f"{cls.__name__}: {leaf.key} and {seen[name]} both want the flag {name}")
        seen[name] = leaf.key
        help_text = spec.help if spec.help is not None else leaf.doc.replace("``", "`")
        annotation, default, decls, parse = _flag_type(leaf, spec, name)
        param = leaf.key.replace(".", "__")
        info = typer.Option(*decls, help=help_text, show_default=default is not None, rich_help_panel=_panel(cls, leaf))
        out.append(
            (
                _Option(param, leaf, name, parse),
                inspect.Parameter(
                    param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, info]
                ),
            )
        )
    return out


def _panel(cls: type, leaf: config.Leaf) -> str | None:
    """The help panel of a field inside a table: the table field's doc and the table's name in a --config file."""
    if len(leaf.path) == 1:
        return None
    from rich.markup import escape

    table = leaf.path[0]
    doc = config.field_docs(cls).get(table, table).replace("``", "")
    return escape(f"{doc[:1].upper()}{doc[1:]} ([{table}] in a --config file)")


def _flag_type(
    leaf: config.Leaf, spec: Flag, name: str
) -> tuple[Any, Any, tuple[str, ...], Callable[[str], Any] | None]:
    """The annotation, default, declarations and string parser (None: typer converts) of the option for ``leaf``."""
    if spec.parse is not None:
        shown = spec.show(leaf.default) if spec.show is not None else str(leaf.default)
        return str, shown, (name,), spec.parse
    tp, default = leaf.type, leaf.default
    if tp is bool:
        return bool, default, (f"{name}/--no-{name.removeprefix('--')}",), None
    if typing.get_origin(tp) is tuple:
        items = typing.get_args(tp)
        if any(typing.get_origin(a) is not None for a in items):  # nested: the flag takes a TOML value
            return str, config.dumps({"v": config.to_dict_value(default)})[4:].strip(), (name,), _toml_value
        if items[-1] is Ellipsis:  # any length: the flag repeats
            return types.GenericAlias(list, (items[0],)), list(default), (name,), None
    return tp, default, (name,), None


def _toml_value(text: str) -> Any:
    """A flag's TOML value (``[["best-fit", 2]]``) as Python; the field's type is checked afterwards."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        raise InputError(f'must be a TOML value such as [1, 2] or [["a", 1]], got {text!r}') from None


@dataclasses.dataclass(frozen=True)
class Resume:
    """How a command whose ``run`` takes ``resume: bool`` reads its settings when ``--resume`` is given: from the
    run's own ``config.toml`` (which the command wrote when the run started), with the flags given applied over it.
    A flag that would change any setting but those in ``free`` is refused, and so is ``--config``: a resumed run is
    the run it continues."""

    command: str
    """The command that wrote the run's config.toml (``dcplace train nara``), checked against the file's header."""
    folder: Callable[[Any, Path | None], Path]
    """The run's folder, from the config the flags alone give (defaults under them) and ``--out``."""
    free: tuple[str, ...]
    """Dotted keys a resumed run may change: how far it trains, how its episodes are played."""
    checked: tuple[str, ...] = ()
    """For a run folder without config.toml (a reproduction's training run): the dotted keys the trainer checks
    against the checkpoint, which must then be given as the run had them (its other settings are the checkpoint's)."""


@contextlib.contextmanager
def _no_settings_only_folder(out: object) -> Iterator[None]:
    """A run refused as bad input (exit 2) leaves no ``--out`` folder it made with only its ``config.toml`` in it:
    ``train nalb-learned --sigma inf --out F`` left ``F/config.toml`` behind (the settings are written when a run
    starts, so that an interrupted run can be resumed; a refused one has nothing to resume)."""
    made = isinstance(out, Path) and not out.exists()
    try:
        yield
    except InputError:
        if made and isinstance(out, Path) and out.is_dir() and {p.name for p in out.iterdir()} <= {"config.toml"}:
            shutil.rmtree(out, ignore_errors=True)
        raise


@contextlib.contextmanager
def _unwritable_outputs() -> Iterator[None]:
    """An output the place would not take (a full disk, a read-only mount, no permission: after the whole run, or a
    place ``--out``'s probe could not see) as one sentence naming the file, where it was a traceback (a review);
    any other OSError stays one (a bug)."""
    try:
        yield
    except OSError as exc:
        said = unwritable(exc)
        if said is None:
            raise
        raise said from None


def config_command(
    cls: type[C], flags: Mapping[str, Flag] | None = None, resume: Resume | None = None
) -> Callable[[Callable[Concatenate[C, P], None]], Callable[..., None]]:
    """Decorate ``run(cfg: cls, **extra)`` into a typer command function (see the module docstring). ``flags``
    adjusts single fields, by dotted key or by field name; a table's key (``greedy``) adjusts all its fields.
    ``resume``: where the settings of a resumed run come from (:class:`Resume`)."""
    generated = _options(cls, flags or {})
    by_key = {opt.leaf.key: opt.flag for opt, _ in generated}

    def wrap(run: Callable[Concatenate[C, P], None]) -> Callable[..., None]:
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in list(inspect.signature(run, eval_str=True).parameters.values())[1:]
        ]
        ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
        file_param = inspect.Parameter(
            "config_file",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[Path | None, typer.Option("--config", help=CONFIG_HELP, show_default=False)],
        )

        force_param = inspect.Parameter(
            "force",
            inspect.Parameter.KEYWORD_ONLY,
            default=False,
            annotation=Annotated[bool, typer.Option("--force", help=FORCE_HELP)],
        )

        @functools.wraps(run)
        def command(ctx: typer.Context, config_file: Path | None, force: bool, **kwargs: Any) -> None:
            from_file: set[str] = set()
            given: dict[str, Any] = {}
            with errors_as_exit(by_key, from_file, config_file):
                check_out(kwargs.get("out"))
                for opt, _ in generated:
                    value = kwargs.pop(opt.param)
                    source = ctx.get_parameter_source(opt.param)
                    if source is not None and source.name == "COMMANDLINE":
                        given[opt.leaf.key] = _from_flag(opt, value)
                if resume is not None and kwargs.get("resume"):
                    config_file = run_settings(cls, resume, config_file, given, kwargs.get("out"), by_key)
            with (
                errors_as_exit(by_key, from_file, config_file),
                _no_settings_only_folder(kwargs.get("out")),
                _unwritable_outputs(),
            ):
                with limits.unguarded() if force else contextlib.nullcontext():
                    cfg = resolve(cls, config_file, given, from_file)
                    if resume is not None:  # a run's files by absolute path, in its checkpoint as in its config.toml
                        cfg = anchored(cfg)
                    typing.cast(Callable[..., None], run)(cfg, **kwargs)

        params = [ctx_param, file_param, *(p for _, p in generated), *own, force_param]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {}
        del command.__wrapped__  # typer must read the generated signature, not run's
        return command

    return wrap


def run_settings(
    cls: type, rule: Resume, config_file: Path | None, given: Mapping[str, Any], out: object, flags: Mapping[str, str]
) -> Path | None:
    """The ``config.toml`` a resumed run takes its settings from (:class:`Resume`), after checking that the flags
    ``given`` (dotted key -> value) change only what ``rule.free`` allows; ``flags``: dotted key -> flag. None for a
    run folder without config.toml (said on stderr; the trainer checks ``rule.checked`` against its checkpoint)."""
    free = ", ".join(flags.get(key, key) for key in rule.free)
    if config_file is not None:
        raise InputError(f"--config and --resume do not go together: a resumed run takes its settings from its own "
                         f"config.toml, and only {free} may change")  # fmt: skip
    folder = rule.folder(resolve(cls, None, given), out if isinstance(out, Path) else None)
    path = folder / "config.toml"
    if not path.is_file():
        if not (folder / "checkpoint.pt").exists():
            raise InputError(f"{folder} holds no run to resume (no checkpoint.pt); start one without --resume")
        needs = ", ".join(flags.get(key, key) for key in rule.checked)
        note = (f"note: {folder} has no config.toml, so the run's settings are its checkpoint's; {needs} must be "
                f"given as the run had them (they are checked), other flags but {free} are not read")  # fmt: skip
        typer.echo(note, err=True)
        return config_file
    owner = made_by(folder)
    if owner != rule.command:
        raise InputError(f"{path} holds the settings of `{owner or 'another command'}`, not of `{rule.command}`")
    ran = _flat(config.to_dict(resolve(cls, path, {})))
    asked = _flat(config.to_dict(anchored(resolve(cls, path, given))))  # lt.csv given again is the same file
    for key in given:
        if key not in rule.free and ran.get(key) != asked.get(key):
            flag, now, was = flags.get(key, key), _shown(asked.get(key)), _shown(ran.get(key))
            raise InputError(f"{flag} {now} would change the run in {folder} (it has {was}); a resumed run keeps "
                             f"its settings, only {free} may change")  # fmt: skip
    return path


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested settings dict as dotted key -> value."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{prefix}{key}"
        flat.update(_flat(value, where + ".") if isinstance(value, Mapping) else {where: value})
    return flat


def _shown(value: Any) -> str:
    """A setting's value as a TOML file spells it (``"huawei-east-1"``, ``64``, ``true``)."""
    return "unset" if value is None else config.dumps({"v": value})[4:].strip()


FILE_OUTPUTS = tuple(dict.fromkeys(EPISODE_SUFFIXES + ASSIGNMENT_SUFFIXES))
"""``--out`` names ending so are one file of records (``simulate``'s episodes, ``solve``'s assignment)."""


def check_out(out: object) -> None:
    """Before any work: refuse an ``--out`` that names an existing file (a records file, :data:`FILE_OUTPUTS`, is
    never overwritten; anything else must be a folder, created when missing), or a Parquet file where pyarrow, which
    writes it, is not installed."""
    if not isinstance(out, Path):
        return
    if out.exists() and not out.is_dir():
        if out.suffix.lower() in FILE_OUTPUTS:
            raise InputError(f"--out {out} already exists; remove it or choose another name")
        raise InputError(f"--out {out} is an existing file; it must name a folder (created when missing)")
    if out.suffix.lower() == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise InputError(f"--out {out}: writing Parquet needs pyarrow (pip install pyarrow); write a .csv instead")
    blocked = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:  # it was a NotADirectoryError traceback from mkdir
        raise InputError(f"--out {out}: {blocked} is a file, so nothing can be made inside it")
    # where the outputs (or the folders above them) will be made: a PermissionError traceback after the whole run
    made_in = out if out.is_dir() else next((p for p in out.parents if p.is_dir()), Path("."))
    if not os.access(made_in, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: cannot write in {made_in} (permission denied)")
    try:  # os.access says yes for root, a read-only mount, sysfs, ACLs: a file made and removed says for sure
        fd, probe = tempfile.mkstemp(prefix=".dcplace-probe-", dir=made_in)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise InputError(f"--out {out}: cannot write in {made_in} ({e.strerror or e})") from None
    for name in ("result.json", "config.toml"):  # the files a run writes there: a folder in their place was a
        if (out / name).is_dir():  # traceback after the run
            raise InputError(f"--out {out}: {out / name} is a folder, where the run writes its {name}")


def _from_flag(opt: _Option, value: Any) -> Any:
    if opt.parse is not None:
        try:
            return opt.parse(value)
        except InputError as exc:
            raise InputError(exc.detail, field=opt.leaf.key) from None
    if isinstance(value, list):
        return tuple(value)
    return value


def resolve(cls: type[C], file: Path | None, given: Mapping[str, Any], from_file: set[str] | None = None) -> C:
    """The config ``cls``: its defaults, under the TOML ``file``'s values (if any), under ``given`` (dotted keys,
    from flags). The dotted keys the file set (and no flag replaced) are added to ``from_file``."""
    data: dict[str, Any] = {}
    if file is not None:
        data = config.parse(cls, config.read_toml(file), source=file)
        if from_file is not None:
            from_file.update(k for k in _flat(data) if k not in given)
    data = config.merge(data, config.parse(cls, config.unflatten(given)))
    return config.build(cls, data)


@contextlib.contextmanager
def errors_as_exit(
    flags: Mapping[str, str] | None = None, from_file: set[str] | None = None, file: Path | None = None
) -> Iterator[None]:
    """Inside it, an :class:`InputError` ends the command: one sentence on stderr, exit code 2. ``flags`` maps
    config keys to flags for the wording (see :func:`sentence`); keys in ``from_file`` name ``file`` instead."""
    try:
        yield
    except InputError as exc:
        typer.echo(f"error: {sentence(exc, flags or {}, from_file or set(), file)}", err=True)
        raise typer.Exit(2) from None


def sentence(exc: InputError, flags: Mapping[str, str], from_file: set[str], file: Path | None) -> str:
    """The one sentence for ``exc``: a field set by ``file`` (a key in ``from_file``) names the file and its dotted
    key; a field set by a flag or left at its default is worded with its flag (``flags``: dotted key -> flag). Core
    code names its own field (``packs``), not the config's path: the only key ending in ``.packs`` is meant."""
    if isinstance(exc, limits.SizeError):
        return _sentence(exc, flags, from_file, file) + "; --force runs it anyway"
    return _sentence(exc, flags, from_file, file)


def _sentence(exc: InputError, flags: Mapping[str, str], from_file: set[str], file: Path | None) -> str:
    if exc.path is not None or exc.field is None:
        return str(exc)
    key = exc.field if exc.field in flags or exc.field in from_file else _unique_key([*flags, *from_file], exc.field)
    if key in from_file and file is not None:
        return str(InputError(_bare(exc), path=file, field=key, line=exc.line))
    flag = flags.get(key or "")
    return flag_wording(flag, exc) if flag else str(exc)


def _unique_key(keys: list[str], field: str) -> str | None:
    """The only dotted key ending in ``.field``; None when none or several do."""
    hits = {key for key in keys if key.rsplit(".", 1)[-1] == field}
    return hits.pop() if len(hits) == 1 else None


def _bare(exc: InputError) -> str:
    """The detail without the field's name in front: ``packs must be ...`` (``field='packs'``) -> ``must be ...``."""
    name = (exc.field or "").rsplit(".", 1)[-1]
    return exc.detail[len(name) + 1 :] if name and exc.detail.startswith(name + " must ") else exc.detail


def flag_wording(flag: str, exc: InputError) -> str:
    """A field's error in its flag's words: ``must be at least 1, got 0`` (``field='pms'``) and ``pms must be at
    least 1, got 0`` both become ``--pms must be at least 1, got 0``; other details follow ``--pms: ``."""
    detail = _bare(exc)
    return f"{flag} {detail}" if detail.startswith("must ") else f"{flag}: {detail}"


def handle_input_errors(fn: Callable[P, None]) -> Callable[P, None]:
    """Decorate a command: an InputError it raises ends it with one sentence on stderr and exit code 2."""

    @functools.wraps(fn)
    def command(*args: P.args, **kwargs: P.kwargs) -> None:
        with errors_as_exit():
            fn(*args, **kwargs)

    return command


CONFIG_HEADER = "# The resolved settings of `"
"""How ``config.toml``'s first line starts; the command and a backtick follow (:func:`made_by` reads it back)."""


def made_by(out: Path) -> str | None:
    """The command whose resolved settings ``out/config.toml`` holds (its header, :func:`write_config`), or None."""
    try:
        first = (out / "config.toml").read_text(encoding="utf-8").split("\n", 1)[0]
    except (OSError, UnicodeDecodeError):
        return None
    rest = first[len(CONFIG_HEADER) :]
    return rest.split("`", 1)[0] if first.startswith(CONFIG_HEADER) and "`" in rest else None


def write_config(cfg: object, out: Path, command: str, final: Path | None = None) -> Path:
    """Write the resolved config as ``out/config.toml``, headed by the command that repeats the run; ``final``: the
    folder ``out`` becomes (``out`` being its temporary twin, :func:`dcplace.atomic.atomic_dir`), named in the
    header."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.toml"
    shown = (final or out) / "config.toml"
    # quoted and absolute: a folder named with a space split the line, and a relative one held only from here
    header = (
        f"{CONFIG_HEADER}{command}`; repeat the run with\n#   {command} --config {shlex.quote(str(shown.absolute()))}"
    )
    config.write(anchored(cfg), path, header)
    return path


def anchored(cfg: C) -> C:
    """``cfg`` with every setting that names an existing file or folder by a relative path (``trace = "lt.csv"``)
    made absolute, so a run's config.toml repeats it from any folder (it failed elsewhere: "must be one of ...").
    Names that are not paths (``alpha``, ``huawei-east-1``: no folder separator, no suffix) stay as they are."""
    changes: dict[str, Any] = {}
    for key, value in _flat(config.to_dict(cfg)).items():
        if not isinstance(value, str) or not value:
            continue
        where = Path(value)
        if not where.is_absolute() and ("/" in value or where.suffix) and where.exists():
            changes[key] = str(where.resolve())
    return config.override(cfg, changes) if changes else cfg
