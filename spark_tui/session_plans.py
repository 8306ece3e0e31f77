"""What a session would run: a wall's fix, a launch, a stop, planned for this cluster and the
recipe in use (the preview is the run). A service of the session (its composition root)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from spark_tui import policy
from spark_tui.errors import SparkTuiError
from spark_tui.remedy.fixes import FixPlan, action_plan

if TYPE_CHECKING:
    from spark_tui.kb.diagnosis import DiagnosisView
    from spark_tui.kb.schema import Fix
    from spark_tui.nodes.cluster import ClusterConfig
    from spark_tui.recipes.model import Recipe
    from spark_tui.session import Session


class Plans:
    def __init__(self, session: Session) -> None:
        self.session = session
        self._preview_cache: dict[tuple, list[str]] = {}
        self._weights_at: dict[str, str | None] = {}  # model id -> plain directory

    def plan_fix(self, diagnosis: DiagnosisView, fix: Fix) -> FixPlan:
        """A wall's fix planned for this cluster and recipe (what the run runs)."""
        from spark_tui.remedy.fixes import plan_fix

        names = {n.name for n in self.session.config.nodes}
        seen = diagnosis.target_node if diagnosis.target_node in names else None
        launches = any(a.type in ("relaunch", "restart-ray") for a in fix.actions)
        return plan_fix(
            fix,
            self.launch_cluster(self.session.recipe()) if launches else self.session.config,
            recipe=self.session.recipe(),
            seen=seen,
            wall=diagnosis.wall.id,
            recipes=self.session.recipes().recipes,
            containers=self.session.serving_containers(),
            facts={n: st.facts() for n, st in self.session.states().items()},
        )

    def fix_lines(self, diagnosis: DiagnosisView, fix: Fix) -> list[str]:
        """A fix's commands as planned for this cluster, without the title line (for a pane
        that redraws often: cached per wall, node and recipe revision)."""
        r = self.session.recipe()
        key = (diagnosis.wall.id, fix.id, diagnosis.target_node, r and (r.id, r.revision))
        lines = self._preview_cache.get(key)
        if lines is None:
            try:
                lines = self.plan_fix(diagnosis, fix).preview_lines()[1:]
            except SparkTuiError as exc:
                lines = [f"# cannot plan it for this cluster: {exc}"]
            self._preview_cache[key] = lines
        return lines

    def plan_launch(self, clean: bool | None = None) -> FixPlan:
        """(Re)launch the recipe in use: stop the stack, drop caches (as the recipe says,
        unless `clean` says otherwise), Ray, serve, smoke."""
        recipe = self.session._require_recipe("launch")
        serves = any(st.engine is not None for st in self.session.states().values())
        verb = "Relaunch" if serves or self.session._last_launch_at is not None else "Launch"
        return action_plan(
            "relaunch",
            f"{verb} {recipe.id} (rev {recipe.revision})",
            [("relaunch", {"clean": recipe.drop_caches if clean is None else clean})],
            self.launch_cluster(recipe),
            recipe,
        )

    def launch_cluster(self, recipe: Recipe | None) -> ClusterConfig:
        """The cluster as a launch plan sees it: with where the head node holds the recipe's
        weights when that is a plain directory, not the hub layout (read once per model)."""
        from spark_tui.nodes.model_paths import plain_model_dir

        head = self.session.config.head if self.session.config.nodes else None
        if recipe is None or head is None or head.name not in self.session.transports:
            return self.session.config
        if policy.read_only():  # no launch runs: nothing is read for one
            return self.session.config
        key = recipe.model.path
        if key not in self._weights_at:
            try:
                self._weights_at[key] = plain_model_dir(
                    key,
                    recipe.volumes,
                    self.session.config.models_dir,
                    self.session.transports[head.name],
                    head,
                )
            except SparkTuiError:  # unreachable: the launch finds out
                self._weights_at[key] = None
        found = self._weights_at[key]
        if not found:
            return self.session.config
        return dataclasses.replace(self.session.config, weights_at={key: found})

    def plan_stop(self) -> FixPlan:
        """Stop the serving stack and Ray on every node (containers renamed aside: logs kept)."""
        return action_plan(
            "stop",
            "Stop serving and Ray on every node",
            [("stop-stack", {"on": "all"})],
            self.session.config,
            self.session.recipe(),
        )
