"""The read-only checks of a session: the doctor's preflight, whether a recipe fits the
nodes, whether its engine knows its flags. A service of the session (its composition root)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui import policy
from spark_tui.errors import InputError

if TYPE_CHECKING:
    from spark_tui.nodes.doctor import DoctorReport
    from spark_tui.recipes.fit import FitReport
    from spark_tui.recipes.flagcheck import FlagReport
    from spark_tui.recipes.model import Recipe
    from spark_tui.session import Session


class Checks:
    def __init__(self, session: Session) -> None:
        self.session = session

    def doctor(self) -> DoctorReport:
        """Read-only preflight of every node; its readings feed the monitor's walls too, so
        the doctor and the walls list never disagree."""
        from spark_tui.nodes.doctor import run_doctor
        from spark_tui.nodes.model_paths import recipe_model_paths

        recipe = self.session.recipe()
        report = run_doctor(
            self.session.config,
            self.session.transports,
            self.session.kb,
            self.session.clock,
            recipe_facts=recipe.facts() if recipe else None,
            image=recipe.image if recipe else None,
            model_paths=(
                recipe_model_paths(
                    recipe.model.path, recipe.volumes, self.session.config.models_dir
                )
                if recipe
                else ()
            ),
            fit_recipe=recipe,
            serving=(
                {n: st.serving for n, st in self.session.monitor.states().items()}
                if self.session.monitor is not None
                else None
            ),
        )
        if self.session.monitor is not None:
            self.session.monitor.adopt(report.states)
        return report

    def fit(self, recipe: Recipe) -> tuple[FitReport, dict[str, str]]:
        """Whether a recipe's model fits each node's memory now (one round of readings), and
        the nodes that could not be read (name -> why)."""
        from spark_tui.recipes.fit import fit_nodes, read_states

        if len(self.session.config.nodes) < recipe.nodes:
            raise InputError(
                f"recipe {recipe.id!r} needs {recipe.nodes} nodes; the cluster "
                f"({self.session.config.source}) has {len(self.session.config.nodes)}"
            )
        nodes = [self.session.config.head, *self.session.config.workers][: recipe.nodes]
        states = read_states(nodes, self.session.transports, self.session.clock)
        unreachable = {
            n: st.unavailable.get("node", "") for n, st in states.items() if not st.reachable
        }
        measured = None
        head = self.session.config.head
        if recipe.model.checkpoint_bytes is None and states.get(head.name, None) is not None:
            from spark_tui.nodes.model_paths import model_size, recipe_model_paths

            paths = recipe_model_paths(
                recipe.model.path, recipe.volumes, self.session.config.models_dir
            )
            if states[head.name].reachable and paths:
                size, where = model_size(self.session.transports[head.name], head, paths)
                if size:
                    measured = (size, f"measured on {head.name}: {where}")
        return fit_nodes(recipe, self.session.config, states, measured), unreachable

    def check_flags(self, recipe: Recipe) -> FlagReport:
        """Run the recipe image's own --help in a throw-away container on the node that
        starts the serve command (nothing running is stopped) and report the flags its engine
        does not know, with their new names where the knowledge base has them. Journaled."""
        from spark_tui.nodes.transport import NodeUnreachable
        from spark_tui.recipes import flagcheck

        if len(self.session.config.nodes) < recipe.nodes:
            raise InputError(
                f"recipe {recipe.id!r} needs {recipe.nodes} nodes; the cluster "
                f"({self.session.config.source}) has {len(self.session.config.nodes)}"
            )
        node, words = flagcheck.serve_words(recipe, self.session.config)
        report = flagcheck.FlagReport(recipe.id, recipe.image or "", node, recipe.engine)
        if not recipe.image:
            report.error = "the recipe names no image (--set image=NAME)"
            return report
        policy.refuse_if_read_only(f"start a throw-away container of {recipe.image} on {node}")
        command = flagcheck.help_command(recipe, recipe.image, words)
        self.session.journal.append(
            event="started", action="check-flags", node=node, command=command
        )
        try:
            res = self.session.transports[node].run(command, timeout=600.0)
        except NodeUnreachable as exc:
            self.session.journal.append(event="finished", action="check-flags", node=node, ok=False)
            report.error = f"{node} unreachable ({exc})"
            return report
        known, unknown, renamed = flagcheck.check_words(words, res.stdout, recipe.engine)
        report.known, report.unknown, report.renamed = known, unknown, renamed
        report.bad_values = flagcheck.check_values(words, res.stdout, recipe.engine)
        if not known:
            report.error = (
                f"the image printed no option list (exit {res.exit_code}"
                + (f": {res.tail(1)}" if res.tail(1) else "")
                + ")"
            )
        self.session.journal.append(
            event="finished",
            action="check-flags",
            node=node,
            exit=res.exit_code,
            ok=report.ok,
            unknown=unknown,
            bad_values=[f"{b.flag} {b.value}" for b in report.bad_values],
        )
        return report
