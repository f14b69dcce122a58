"""List the registered policies and the rule each implements."""

from __future__ import annotations

import json
from typing import Annotated

import typer

app = typer.Typer(add_completion=False, rich_markup_mode=None)


@app.command("policies")
def list_policies(
    json_out: Annotated[
        bool, typer.Option("--json", help='print {"numa": {name: rule}, "netalloc": {name: rule}} as one JSON object')
    ] = False,
) -> None:
    """List the registered policies and the rule each implements."""
    from dcplace.policies.registry import plugin_problems, policy_doc, policy_names

    rules = {setting: {name: policy_doc(name, setting) for name in policy_names(setting)}
             for setting in ("numa", "netalloc")}  # fmt: skip
    if json_out:
        typer.echo(json.dumps(rules))
    else:
        for setting, named in rules.items():
            typer.echo(f"{setting}:")
            for name, rule in named.items():
                typer.echo(f"  {name:18s} {rule}")
    for problem in plugin_problems():  # an installed plugin that is not listed above, or not what its name runs
        typer.echo(f"warning: {problem}", err=True)
