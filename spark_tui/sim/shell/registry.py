"""The one table of the simulated nodes' commands, gathered from the modules that hold them."""

from __future__ import annotations

from functools import cache

from spark_tui.sim.shell.context import ANYWHERE, CONTAINER, HOST, Command, CommandFn


@cache
def commands() -> dict[str, Command]:
    """Every command by name; a name two modules claim is an error."""
    # imported here: the command modules call back into the interpreter (sudo, sh -c, ssh)
    from spark_tui.sim.shell import (
        builtins,
        curl,
        docker_cli,
        engines,
        files,
        network,
        system,
        textutils,
    )

    table: dict[str, Command] = {}
    for module in (builtins, files, textutils, system, network, curl, docker_cli, engines):
        for name, command in module.COMMANDS.items():
            if name in table:
                raise ValueError(f"command {name!r} is registered twice")
            table[name] = command
    return table


def lookup(name: str, in_container: bool) -> CommandFn | None:
    """The function that runs `name` on a host or inside a container (None: not found)."""
    here = CONTAINER if in_container else HOST
    table = commands()
    command = table.get(name)
    if command is None:
        command = next((c for k, c in table.items() if c.prefix and name.startswith(k)), None)
    if command is None or command.where not in (ANYWHERE, here):
        return None
    return command.run
