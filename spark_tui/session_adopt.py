"""Adopting what runs: the serving engine found on the nodes (whoever started it), written
as a recipe the session uses from then on. A service of the session (its composition root)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from spark_tui import policy
from spark_tui.errors import InputError

if TYPE_CHECKING:
    from spark_tui.nodes.state import NodeState
    from spark_tui.recipes.model import Recipe
    from spark_tui.session import Session


class Adoption:
    def __init__(self, session: Session) -> None:
        self.session = session

    def running_engine(self) -> tuple[str, NodeState] | None:
        """(node, its readings) of the node whose serving engine runs now (`.engine`),
        whoever started it (the head's first): read from each node's processes."""
        from spark_tui.nodes.sampler import sample

        states = self.session.states() or {
            n.name: sample(self.session.transports[n.name], n, self.session.clock)
            for n in self.session.config.nodes
        }
        order = [self.session.config.head.name] + [n.name for n in self.session.config.workers]
        for name in order:
            st = states.get(name)
            if st is not None and st.reachable and st.engine is not None:
                return name, st
        return None

    def adopt_running(self) -> tuple[Recipe, str]:
        """The deployment running now as a recipe, derived from its engine's command line and
        its container (image, name): the recipe, and the file text to show before saving."""
        import shlex

        from spark_tui import paths
        from spark_tui.engine_command import engine_words
        from spark_tui.monitor import engine_container
        from spark_tui.nodes import commands
        from spark_tui.nodes.parsers.processes import (
            engine_from_args,
            parse_engine_argv,
            parse_engine_output,
        )
        from spark_tui.recipes.eugr import adopted_recipe
        from spark_tui.recipes.revisions import recipe_to_yaml
        from spark_tui.untrusted import escaped

        found = self.running_engine()
        if found is None:
            raise InputError(
                "no serving engine runs on any node (no `vllm serve` or SGLang server in ps): "
                "nothing to adopt; choose a recipe (spark-tui recipes list)"
            )
        node, state = found
        engine = state.engine
        assert engine is not None  # running_engine found one there
        from spark_tui import shell

        res = self.session.transports[node].run(
            shell.fill(commands.ENGINE_OUTPUT, {"pid": engine.pid}), timeout=15.0
        )
        out = parse_engine_output(res.stdout)
        if not out.real_engine:
            raise InputError(
                f"{node}: pid {engine.pid} names an engine but runs {out.exe}: nothing to adopt"
            )
        exact = parse_engine_argv(
            self.session.transports[node]
            .run(shell.fill(commands.ENGINE_ARGV, {"pid": engine.pid}), timeout=15.0)
            .stdout
        )
        if exact == []:
            raise InputError(
                f"{node}: pid {engine.pid} is no longer an engine of root or of our user "
                "(another owner or program): nothing to adopt"
            )
        if exact is not None:  # the words as they ran (ps joined them with spaces)
            engine = engine_from_args(engine.pid, exact) or engine
        container = engine_container(out, state)
        image = next((c.image for c in state.containers if c.name == container), None)
        words = engine_words(list(engine.args)) or list(engine.args)
        model = (engine.model or "model").rstrip("/").split("/")[-1].lower()
        rid = "adopted-" + "".join(ch if ch.isalnum() or ch in ".-" else "-" for ch in model)
        recipe = adopted_recipe(words, engine.model, image, rid, node)
        recipe = dataclasses.replace(
            recipe,
            head_container=container or recipe.head_container,
            sources=(),
            notes=(f"Adopted from the engine running on {node} (pid {engine.pid}).",),
            image_note="" if image else "the image could not be read: set it (--set image=NAME)",
            origin="spark-tui",
        )
        where = f"container {container} ({image})" if container else "no container"
        head = [
            f"# Adopted by spark-tui from the engine running on {node} (pid {engine.pid}, {where}):",
            # whole: the operator confirms what runs (a line break in a word is shown as its
            # escape: a comment line cannot end early; the recipe keeps the word as it is)
            f"#   {escaped(shlex.join(engine.args))}",
            f"# status: untested; edit it as you would any recipe ({paths.doc('recipes.md')}).",
        ]
        head += [f"#   {u.kind}: {escaped(str(u))}" for u in recipe.unmapped]
        return recipe, "\n".join(head) + "\n" + recipe_to_yaml(recipe)

    def save_adopted(self, recipe: Recipe, text: str) -> Path | None:
        """Use an adopted recipe from now on; on a real cluster it is saved among the user's
        recipes (a simulation keeps it for the session). The path written, if any."""
        policy.refuse_if_read_only(f"save the adopted recipe {recipe.id}")
        path = None
        if not self.session.simulated:
            from spark_tui import paths

            path = paths.user_recipes_dir() / f"{recipe.id}.yaml"
            if path.exists() or path.is_symlink():  # a dangling symlink is never written through
                raise InputError(f"{path} exists: remove or rename it first", str(path))
            path.parent.mkdir(parents=True, exist_ok=True)
            from spark_tui.safefile import write_atomic

            write_atomic(path, text, 0o644, own=False)
        self.session._adopted[recipe.id] = recipe
        self.session.journal.append(
            event="recipe-adopted", recipe=recipe.id, file=str(path) if path else None
        )
        self.session._book = None
        self.session.use_recipe(recipe.id)
        return path
