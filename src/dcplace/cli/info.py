"""List the registered policies and the rule each implements."""

from __future__ import annotations

import typer

app = typer.Typer(add_completion=False, rich_markup_mode=None)


@app.command("policies")
def list_policies() -> None:
    """List the registered policies and the rule each implements."""
    from dcplace.policies.registry import plugin_problems, policy_doc, policy_names

    for setting in ("numa", "netalloc"):
        typer.echo(f"{setting}:")
        for name in policy_names(setting):
            typer.echo(f"  {name:18s} {policy_doc(name, setting)}")
    for problem in plugin_problems():  # an installed plugin that is not listed above, or not what its name runs
        typer.echo(f"warning: {problem}", err=True)
