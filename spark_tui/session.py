"""One cluster session: the one way every front end opens a cluster, real or simulated.

    with open_cluster(config_path) as session:          # or open_cluster(scenario="page-cache-hog")
        session.start(listener)                          # the live monitor; events to listeners
        plan = session.plan_fix(diagnosis, fix)          # preview == run
        result = session.apply(plan, confirm, progress)  # journaled, verified
        session.apply(session.plan_launch(), confirm)    # a relaunch is an action like any other

The session owns the config, the transports (one factory), the clock, the knowledge base,
the recipe in use and its revision store, the monitor with the recipe's log sources,
evidence capture, reboot expectations, the auto-relaunch guard, the journal and the state
directory. A simulated cluster keeps all of its state in a directory of its own, discarded
when the session closes (unless kept), so a demo never changes what a real session finds.

The TUI, `watch`, `doctor`, `fix`, `report`, `recipes fit`, `up`, `stop` and `status` are
thin callers: none builds transports, monitors or journals itself. No Textual here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui import policy
from spark_tui.clock import Clock, RealClock
from spark_tui.errors import InputError, SparkTuiError
from spark_tui.events import ActionProgress, DiagnosisRaised, DiagnosisResolved, Event
from spark_tui.kb.diagnosis import Diagnosis
from spark_tui.kb.loader import KnowledgeBase
from spark_tui.kb.matcher import Matcher
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.state import NodeState
from spark_tui.nodes.transport import Transport
from spark_tui.recipes.plan import LaunchPlan
from spark_tui.recipes.revisions import RevisionStore
from spark_tui.remedy.fixes import Confirm, FixPlan, FixResult, RunEnvironment, action_plan
from spark_tui.remedy.journal import Journal, UnfinishedRun, unfinished
from spark_tui.remedy.launch import AutoRelaunchGuard
from spark_tui.session_adopt import Adoption
from spark_tui.session_report import Reports
from spark_tui.session_status import NodeStatus, StatusReader
from spark_tui.state import StateDir

if TYPE_CHECKING:
    from spark_tui.monitor import ClusterMonitor
    from spark_tui.nodes.doctor import DoctorReport
    from spark_tui.recipes.fit import FitReport
    from spark_tui.recipes.flagcheck import FlagReport
    from spark_tui.recipes.loader import RecipeBook
    from spark_tui.recipes.model import Recipe
    from spark_tui.recipes.revisions import Served
    from spark_tui.remedy.evidence import AutoEvidence
    from spark_tui.sim.cluster import SimCluster

Listener = Callable[[Event], None]
Applied = Callable[[FixPlan, FixResult], None]
Progress = Callable[[ActionProgress], None]
REAL_PERIOD_S = 0.5  # real seconds between two sampling rounds of a node, at most
MIN_PERIOD_S = 2.0  # clock seconds: a slow clock must not mean two rounds a second


@contextlib.contextmanager
def open_cluster(config: str | Path | None = None, **options: Any) -> Iterator[Session]:
    """Open a cluster (Session.open: a scenario, a cluster.yaml, or what `no_config` says
    with none) for the block; closed when it ends (monitor stopped, connections closed, a
    simulation's scratch state removed)."""
    session = Session.open(config, **options)
    try:
        yield session
    finally:
        session.close()


class Session:
    """One cluster, open; see the module docstring. Thread-safe where front ends need it:
    events come from the monitor's threads, actions run in a worker thread."""

    def __init__(
        self,
        config: ClusterConfig,
        transports: dict[str, Transport],
        clock: Clock,
        kb: KnowledgeBase,
        state: StateDir,
        *,
        sim: SimCluster | None = None,
        scenario: str | None = None,
        no_cluster_yaml: bool = False,
        recipe_id: str | None = None,
    ) -> None:
        self.config = config
        self.transports = transports
        self.clock = clock
        self.kb = kb
        self.state = state
        self.sim = sim  # the SimCluster when simulated (tests reach its world through it)
        self.scenario = scenario
        self.no_cluster_yaml = no_cluster_yaml
        self.journal = Journal(state.journal_path, simulated=state.simulated)
        self.revisions = RevisionStore(state.revisions_dir)
        self.guard = AutoRelaunchGuard(state.auto_relaunch_path)
        self.monitor: ClusterMonitor | None = None
        self._listeners: list[Listener] = []
        self._listen_lock = threading.Lock()
        self._recipe_id = recipe_id
        self._recipe: Recipe | None = None
        self._book: RecipeBook | None = None
        self._applied: list[Applied] = []
        self._evidence: AutoEvidence | None = None
        self._last_launch_at: float | None = None
        self._last_tok_s: float | None = None
        self._preview_cache: dict[tuple, list[str]] = {}
        self._adopted: dict[str, Recipe] = {}  # recipes adopted from what runs, this session
        self._weights_at: dict[str, str | None] = {}  # model id -> plain directory (launch_cluster)
        self.closing = threading.Event()  # set by close(): an action's waits end early
        # the named services this composition root hands its parts to
        self.adoption = Adoption(self)
        self.status_reader = StatusReader(self)
        self.reports = Reports(self)
        self._closed = False

    # ---- opening and closing ---------------------------------------------------------
    @classmethod
    def open(
        cls,
        config: str | Path | None = None,
        *,
        scenario: str | None = None,
        recipe: str | None = None,
        speed: float | None = None,
        clock: Clock | None = None,
        keep_state: bool = False,
        read_only: bool = False,
        no_config: str = "simulate",
        sim_nodes: int | None = None,
        demo_flag: bool = True,
    ) -> Session:
        """`scenario` plays a simulated cluster (at `speed`, or on `clock`; `sim_nodes` nodes;
        its state kept when `keep_state`); else `config` (a cluster.yaml), else ./cluster.yaml
        or ~/.config/spark-tui/cluster.yaml; with none, `no_config` says what to do:
        "simulate" (the simulated cluster, saying so), "refuse" (InputError), or "offline"
        (no nodes, the real state: a report of the journal). `recipe` names the recipe to use
        instead of cluster.yaml's; `read_only` refuses every change from here on."""
        from spark_tui.kb.loader import load_knowledge

        if read_only:
            policy.set_read_only(True)
        kb = load_knowledge()
        if scenario is None:
            from spark_tui.nodes.config import cluster_config_path, load_cluster

            path = cluster_config_path(config)
            if path is not None:
                from spark_tui.nodes.transports import open_transports

                cluster = load_cluster(path)
                return cls(
                    cluster,
                    open_transports(cluster),
                    clock or RealClock(),
                    kb,
                    StateDir.real(),
                    recipe_id=recipe or cluster.recipe,
                )
            if no_config == "refuse":
                from spark_tui import paths

                raise InputError(
                    "no cluster.yaml (./cluster.yaml or ~/.config/spark-tui/cluster.yaml): "
                    f"write one (see {paths.doc('cluster-yaml.md')} or 'spark-tui discover') "
                    "or pass --config FILE"
                    + (", or --demo SCENARIO for the simulated cluster" if demo_flag else "")
                )
            if no_config == "offline":
                empty = ClusterConfig(nodes=(), source="<no cluster.yaml>")
                return cls(empty, {}, clock or RealClock(), kb, StateDir.real(), recipe_id=recipe)
        from spark_tui.sim import DEFAULT_SCENARIO, build_sim_cluster

        name = scenario or DEFAULT_SCENARIO
        kwargs: dict[str, Any] = {"nodes": sim_nodes} if sim_nodes else {}
        if clock is not None:
            kwargs["clock"] = clock
        elif speed:
            kwargs["speed"] = speed
        sim = build_sim_cluster(name, **kwargs)
        return cls(
            sim.config,
            dict(sim.transports),
            sim.clock,
            kb,
            StateDir.for_simulation(name, keep=keep_state),
            sim=sim,
            scenario=name,
            no_cluster_yaml=scenario is None,
            recipe_id=recipe,
        )

    def close(self) -> None:
        """Stop the monitor, close every connection, drop a simulation's scratch state."""
        if self._closed:
            return
        self._closed = True
        self.closing.set()
        self.stop_watching()
        if self._evidence is not None:
            self._evidence.wait(10.0)
        if self.sim is not None:
            self.sim.close()
        else:
            for t in self.transports.values():
                with contextlib.suppress(Exception):
                    t.close()
        self.state.discard()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def simulated(self) -> bool:
        return self.config.simulated

    @property
    def read_only(self) -> bool:
        return policy.read_only()

    def describe(self) -> str:
        """Which cluster this is, for a title or a status line."""
        n = len(self.config.nodes)
        nodes = f"{n} node{'' if n == 1 else 's'}"
        if self.simulated:
            return f"simulated cluster ({nodes}, scenario {self.scenario})"
        return f"{self.config.source} ({nodes})"

    # ---- recipes -----------------------------------------------------------------------
    def recipes(self) -> RecipeBook:
        """The recipe book: built-in, the user's (not in a simulation), this session's
        revisions; a simulation's scenario recipe as the scenario plays it."""
        if self._book is None:
            from spark_tui.recipes.loader import RecipeBook, load_recipes

            book = load_recipes(use_user=not self.simulated, revisions=self.revisions)
            extra = dict(self._adopted)
            if self.sim is not None and self.sim.recipe is not None:
                variant = self.sim.recipe
                extra[variant.id] = self.revisions.current(variant.id) or variant
            if extra:
                book = RecipeBook({**book.recipes, **extra}, book.errors)
            self._book = book
        return self._book

    def recipe(self) -> Recipe | None:
        """The recipe in use: chosen, switched to by a fix, or cluster.yaml's; at its newest
        revision in this session's store."""
        if self._recipe is None:
            from spark_tui.remedy.actions.recipe_changes import switched_recipe

            rid = self._recipe_id or self.config.recipe
            switched = switched_recipe(self.state.active_recipe_path, rid)
            rid = switched or rid
            if rid is not None:
                self._recipe = self.recipes().get(rid)
        return self._recipe

    def set_aside_bad_recipe(self) -> str | None:
        """Why the recipe named (cluster.yaml's, --recipe) cannot be used — unknown, or its
        file does not load — or None. A front end that keeps running (the TUI) says so and
        goes on without one: this session then has no recipe until one is chosen."""
        try:
            self.recipe()
        except SparkTuiError as exc:
            self._recipe_id = None
            self.config = dataclasses.replace(self.config, recipe=None)
            return str(exc)
        return None

    def use_recipe(self, recipe: Recipe | str) -> Recipe:
        """Use another recipe (by id or as given) from now on; the monitor follows its logs."""
        r = self.recipes().get(recipe) if isinstance(recipe, str) else recipe
        self._recipe = r
        self._recipe_id = r.id
        self._book = None
        if self.monitor is not None:
            self._follow_recipe_logs()
        return r

    @property
    def plays_launch(self) -> bool:
        """Whether this is a simulated story whose recipe is launched as it plays (not a
        deployment already running that spark-tui did not start)."""
        return self.sim is not None and self.sim.recipe is not None and self.sim.scenario.launch

    def running_engine(self) -> tuple[str, NodeState] | None:
        """(node, its NodeState) of the serving engine running now, whoever started it."""
        return self.adoption.running_engine()

    def serving_containers(self) -> dict[str, str]:
        """node -> the serving container running there, as the monitor last saw it (for a
        deployment spark-tui did not start: eugr's vllm_node, a sparkrun container, …)."""
        from spark_tui.nodes.state import is_stack_container

        out: dict[str, str] = {}
        if self.monitor is None:
            return out
        for name, st in self.monitor.states().items():
            running = [c for c in st.containers if c.state == "running" and is_stack_container(c)]
            if running:
                out[name] = running[0].name
        return out

    def adopt_running(self) -> tuple[Recipe, str]:
        """The deployment running now as a recipe, and the file text to show before saving."""
        return self.adoption.adopt_running()

    def save_adopted(self, recipe: Recipe, text: str) -> Path | None:
        """Use an adopted recipe from now on (saved among the user's on a real cluster)."""
        return self.adoption.save_adopted(recipe, text)

    def recipe_label(self) -> str:
        r = self.recipe()
        return "no recipe" if r is None else f"{r.id} rev {r.revision}"

    def recipe_facts(self) -> dict[str, object]:
        r = self.recipe()
        return r.facts() if r is not None else {}

    def undo(self) -> Recipe:
        """Back to the recipe revision before the last patch (every revision stays on disk)."""
        r = self.recipe()
        if r is None:
            raise InputError("no recipe in use: nothing to undo")
        back = self.revisions.undo(r.id)
        self.journal.append(event="recipe-undo", recipe=r.id, revision=back.revision)
        return self.use_recipe(back)

    def rollback_preview(self, recipe_id: str | None = None) -> tuple[Recipe, Served, str]:
        """(the recipe in use, the launch that last served, the diff a rollback applies) for
        the recipe in use or `recipe_id`; InputError when none of its launches served."""
        from spark_tui.recipes.revisions import last_served, unified_diff

        r = self.recipes().get(recipe_id) if recipe_id else self.recipe()
        if r is None:
            raise InputError("no recipe in use: name one to roll back")
        current = self.revisions.current(r.id) or r
        served = last_served(self.revisions, r.id)
        if served is None:
            raise InputError(
                f"recipe {r.id!r} never served here (no launch's smoke request answered): "
                "nothing to roll back to"
            )
        return current, served, unified_diff(current, served.recipe, r.id)

    def rollback(self, recipe_id: str | None = None) -> Recipe:
        """Back to the image and recipe revision that last served, as a new revision (every
        revision stays on disk); journaled before and after. Takes effect at the next launch."""
        from spark_tui.recipes import revisions

        current, served, diff = self.rollback_preview(recipe_id)
        policy.refuse_if_read_only(f"roll back recipe {current.id}")
        self.journal.append(
            event="started",
            action="recipe-rollback",
            recipe=current.id,
            revision=current.revision,
            to_revision=served.revision,
            image=served.image,
        )
        after = revisions.rollback(self.revisions, current, served) if diff else current
        self.journal.append(
            event="finished",
            action="recipe-rollback",
            recipe=current.id,
            revision=after.revision,
            ok=True,
        )
        return self.use_recipe(after)

    # ---- the live monitor ----------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        """Receive every monitor event (from the monitor's threads: be thread-safe)."""
        with self._listen_lock:
            self._listeners.append(listener)

    def _emit(self, event: Event) -> None:
        with self._listen_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)

    def start(
        self, listener: Listener | None = None, period_s: float | None = None
    ) -> ClusterMonitor:
        """Watch every node: readings, the recipe's logs, walls (events to the listeners).
        A wall whose first fix only gathers evidence has it gathered at once. `period_s`:
        clock seconds between two rounds of a node (default: sane for the clock's rate)."""
        if listener is not None:
            self.subscribe(listener)
        if self.monitor is not None:
            return self.monitor
        from spark_tui.monitor import ClusterMonitor
        from spark_tui.remedy.evidence import AutoEvidence

        self._evidence = AutoEvidence(
            self._emit,
            self.config,
            self.transports,
            recipe=self.recipe,
            directory=self.state.evidence_dir,
            containers=self.serving_containers,
        )
        self.monitor = ClusterMonitor(
            self.config,
            self.transports,
            self.kb,
            self.clock,
            self._evidence,
            recipe_facts=self.recipe_facts,
            matcher=self.matcher,
            period_s=period_s or max(MIN_PERIOD_S, REAL_PERIOD_S * self.clock.rate),
        )
        self._evidence.readings = self.monitor
        self.monitor.start()
        self._follow_recipe_logs()
        return self.monitor

    def stop_watching(self) -> None:
        if self.monitor is not None:
            self.monitor.stop(close_transports=False)
            self.monitor = None

    def _follow_recipe_logs(self) -> None:
        """Tail the logs the recipe's launch plan writes, so their lines reach the matcher."""
        recipe = self.recipe()
        if self.monitor is None or recipe is None:
            return
        from spark_tui.recipes.render import render_plan

        try:
            plan = render_plan(recipe, self.config)
        except SparkTuiError:
            return  # a recipe that cannot render for this cluster has no logs to follow
        self.monitor.follow(plan.log_sources)

    def states(self) -> dict[str, NodeState]:
        return self.monitor.states() if self.monitor is not None else {}

    def diagnoses(self, include_resolved: bool = False) -> list[Diagnosis]:
        """Diagnoses so far, newest first (active ones only unless asked)."""
        if self.monitor is None:
            return []
        out = self.monitor.diagnoses().newest_first()
        return out if include_resolved else [d for d in out if d.active]

    def fresh_facts(self, node: str | None) -> dict[str, object]:
        """A node's readings taken now (a fix's verify step); {} for the recipe (None)."""
        if node is None:
            return {}
        from spark_tui.nodes.sampler import sample

        return sample(self.transports[node], self.config.node(node), self.clock).facts()

    # ---- what actions tell the session (remedy.actions.base.SessionHooks) ---------------
    def expect_reboot(self, node: str) -> None:
        if self.monitor is not None:
            self.monitor.expect_reboot(node)

    def launching(self, plan: LaunchPlan) -> None:
        self._last_launch_at = self.clock.now()
        if self.monitor is not None:
            self.monitor.new_attempt(plan.nodes)
            self.monitor.follow(plan.log_sources)

    def recipe_changed(self, recipe: Recipe) -> None:
        self.use_recipe(recipe)

    def stopped(self, nodes: tuple[str, ...]) -> None:
        if self.monitor is not None:
            self.monitor.stopped(nodes)

    def line_seen(self, node: str, text: str) -> threading.Event | None:
        return self.monitor.expect_line(node, text) if self.monitor is not None else None

    def launch_blocker(self) -> str | None:
        if self.monitor is None or self._last_launch_at is None:
            return None
        for d in self.diagnoses():  # a check wall (a setting) never kills a launch by itself
            if (
                d.severity == "error"
                and d.wall.kind != "check"
                and d.first_seen >= self._last_launch_at
            ):
                where = f" on {d.node}" if d.node else ""
                return f"{d.wall.id}{where}: {d.evidence[:200]}"
        return None

    @functools.cached_property
    def matcher(self) -> Matcher:
        """The session's one matcher, of its knowledge base: the monitor, a launch's
        fatal-wall check and a report's triage all use it."""
        return Matcher(self.kb)

    # ---- actions ---------------------------------------------------------------------------
    def environment(self) -> RunEnvironment:
        return RunEnvironment(
            self.transports,
            self.journal,
            self.revisions,
            self.state,
            self.clock,
            hooks=self,
            stop=self.closing,
            matcher=self.matcher,
        )

    def plan_fix(self, diagnosis: Diagnosis, fix: Fix) -> FixPlan:
        """A wall's fix planned for this cluster and recipe (what the run runs)."""
        from spark_tui.remedy.fixes import plan_fix

        names = {n.name for n in self.config.nodes}
        seen = diagnosis.target_node if diagnosis.target_node in names else None
        launches = any(a.type in ("relaunch", "restart-ray") for a in fix.actions)
        return plan_fix(
            fix,
            self.launch_cluster(self.recipe()) if launches else self.config,
            recipe=self.recipe(),
            seen=seen,
            wall=diagnosis.wall.id,
            recipes=self.recipes().recipes,
            containers=self.serving_containers(),
        )

    def fix_lines(self, diagnosis: Diagnosis, fix: Fix) -> list[str]:
        """A fix's commands as planned for this cluster, without the title line (for a pane
        that redraws often: cached per wall, node and recipe revision)."""
        r = self.recipe()
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
        recipe = self._require_recipe("launch")
        serves = any(st.engine is not None for st in self.states().values())
        verb = "Relaunch" if serves or self._last_launch_at is not None else "Launch"
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

        head = self.config.head if self.config.nodes else None
        if recipe is None or head is None or head.name not in self.transports:
            return self.config
        if policy.read_only():  # no launch runs: nothing is read for one
            return self.config
        key = recipe.model.path
        if key not in self._weights_at:
            try:
                self._weights_at[key] = plain_model_dir(
                    key, recipe.volumes, self.config.models_dir, self.transports[head.name], head
                )
            except SparkTuiError:  # unreachable: the launch finds out
                self._weights_at[key] = None
        found = self._weights_at[key]
        if not found:
            return self.config
        return dataclasses.replace(self.config, weights_at={key: found})

    def plan_stop(self) -> FixPlan:
        """Stop the serving stack and Ray on every node (containers renamed aside: logs kept)."""
        return action_plan(
            "stop",
            "Stop serving and Ray on every node",
            [("stop-stack", {"on": "all"})],
            self.config,
            self.recipe(),
        )

    def apply(
        self,
        plan: FixPlan,
        confirm: Confirm | None = None,
        progress: Progress | None = None,
        *,
        yes: bool = False,
    ) -> FixResult:
        """Run a plan (a fix, a launch, a stop): refused under --read-only, confirmed when
        disruptive, journaled; its verify step on fresh readings. The recipe it leaves is
        the one in use from now on; a verified fix resolves the walls it was for."""
        from spark_tui.remedy.fixes import run_fix

        result = run_fix(
            plan,
            self.environment(),
            confirm=confirm,
            emit=progress,
            yes=yes,
            verify_facts=self.fresh_facts,
        )
        if result.recipe is not None and result.recipe is not self._recipe:
            self.use_recipe(result.recipe)
        if result.tok_s is not None:
            self._last_tok_s = result.tok_s
        remedial = any(not a.kind.collects_evidence for a in plan.actions)  # not just evidence
        fixed = result.ok and result.verified is not False and remedial and bool(plan.wall)
        if fixed and self.monitor is not None:
            if not plan.relaunches:
                # the monitor's last readings of the nodes the fix changed are from before it:
                # a round of each now, so no wall is judged again on a reading it made stale
                for node in plan.nodes:
                    if node in self.monitor.transports:
                        self.monitor.sample_once(node)
            self.monitor.resolve_fixed(plan.wall, plan.fix.title, self._last_launch_at)
        if result.message != "not confirmed: nothing ran":
            for listener in list(self._applied):
                listener(plan, result)
        return result

    def subscribe_applied(self, listener: Applied) -> None:
        """Be told of every plan this session ran (the driver keeps its count of launches
        and fixes so; called from the thread that applied it)."""
        self._applied.append(listener)

    def _require_recipe(self, what: str) -> Recipe:
        recipe = self.recipe()
        if recipe is None:
            raise InputError(
                f"no recipe to {what}: name one in cluster.yaml (recipe: ID) or with --recipe, "
                "or adopt what runs now as one (spark-tui recipes adopt)"
            )
        return recipe

    def unfinished(self) -> list[UnfinishedRun]:
        """Changes that started and never ended (a kill, a crash): what may have half-run."""
        return unfinished(self.journal)

    # ---- read-only views ---------------------------------------------------------------------
    def doctor(self) -> DoctorReport:
        """Read-only preflight of every node; its readings feed the monitor's walls too, so
        the doctor and the walls list never disagree."""
        from spark_tui.nodes.doctor import run_doctor
        from spark_tui.nodes.model_paths import recipe_model_paths

        recipe = self.recipe()
        report = run_doctor(
            self.config,
            self.transports,
            self.kb,
            self.clock,
            recipe_facts=recipe.facts() if recipe else None,
            image=recipe.image if recipe else None,
            model_paths=(
                recipe_model_paths(recipe.model.path, recipe.volumes, self.config.models_dir)
                if recipe
                else ()
            ),
            fit_recipe=recipe,
            serving=(
                {n: st.serving for n, st in self.monitor.states().items()}
                if self.monitor is not None
                else None
            ),
        )
        if self.monitor is not None:
            self.monitor.adopt(report.states)
        return report

    def fit(self, recipe: Recipe) -> tuple[FitReport, dict[str, str]]:
        """Whether a recipe's model fits each node's memory now (one round of readings), and
        the nodes that could not be read (name -> why)."""
        from spark_tui.recipes.fit import fit_nodes, read_states

        if len(self.config.nodes) < recipe.nodes:
            raise InputError(
                f"recipe {recipe.id!r} needs {recipe.nodes} nodes; the cluster "
                f"({self.config.source}) has {len(self.config.nodes)}"
            )
        nodes = [self.config.head, *self.config.workers][: recipe.nodes]
        states = read_states(nodes, self.transports, self.clock)
        unreachable = {
            n: st.unavailable.get("node", "") for n, st in states.items() if not st.reachable
        }
        measured = None
        head = self.config.head
        if recipe.model.checkpoint_bytes is None and states.get(head.name, None) is not None:
            from spark_tui.nodes.model_paths import model_size, recipe_model_paths

            paths = recipe_model_paths(recipe.model.path, recipe.volumes, self.config.models_dir)
            if states[head.name].reachable and paths:
                size, where = model_size(self.transports[head.name], head, paths)
                if size:
                    measured = (size, f"measured on {head.name}: {where}")
        return fit_nodes(recipe, self.config, states, measured), unreachable

    def check_flags(self, recipe: Recipe) -> FlagReport:
        """Run the recipe image's own --help in a throw-away container on the node that
        starts the serve command (nothing running is stopped) and report the flags its engine
        does not know, with their new names where the knowledge base has them. Journaled."""
        from spark_tui.nodes.transport import NodeUnreachable
        from spark_tui.recipes import flagcheck

        if len(self.config.nodes) < recipe.nodes:
            raise InputError(
                f"recipe {recipe.id!r} needs {recipe.nodes} nodes; the cluster "
                f"({self.config.source}) has {len(self.config.nodes)}"
            )
        node, words = flagcheck.serve_words(recipe, self.config)
        report = flagcheck.FlagReport(recipe.id, recipe.image or "", node, recipe.engine)
        if not recipe.image:
            report.error = "the recipe names no image (--set image=NAME)"
            return report
        policy.refuse_if_read_only(f"start a throw-away container of {recipe.image} on {node}")
        command = flagcheck.help_command(recipe, recipe.image, words)
        self.journal.append(event="started", action="check-flags", node=node, command=command)
        try:
            res = self.transports[node].run(command, timeout=600.0)
        except NodeUnreachable as exc:
            self.journal.append(event="finished", action="check-flags", node=node, ok=False)
            report.error = f"{node} unreachable ({exc})"
            return report
        known, unknown, renamed = flagcheck.check_words(words, res.stdout, recipe.engine)
        report.known, report.unknown, report.renamed = known, unknown, renamed
        if not known:
            report.error = (
                f"the image printed no option list (exit {res.exit_code}"
                + (f": {res.tail(1)}" if res.tail(1) else "")
                + ")"
            )
        self.journal.append(
            event="finished",
            action="check-flags",
            node=node,
            exit=res.exit_code,
            ok=report.ok,
            unknown=unknown,
        )
        return report

    def status(self) -> list[NodeStatus]:
        """Every node now: reachable, containers, Ray, serving phase, model (StatusReader)."""
        return self.status_reader.status()

    def chat_request(self) -> tuple[bool, str]:
        """One chat request to the engine on the head: whether it answered, tok/s or why not."""
        return self.status_reader.chat_request()

    def last_tok_s(self) -> float | None:
        """tok/s of the newest smoke request that answered (this session's or the journal's)."""
        return self.status_reader.last_tok_s()

    def report(
        self,
        diagnoses: list[Diagnosis] | None = None,
        versions: dict[str, dict[str, str]] | None = None,
    ) -> str:
        """The Markdown incident report of this session (Reports)."""
        return self.reports.report(diagnoses, versions)

    def export_report(self, diagnoses: list[Diagnosis] | None = None) -> Path:
        """Write the report where it outlives the session; its path (Reports)."""
        return self.reports.export_report(diagnoses)


__all__ = [
    "DiagnosisRaised",
    "DiagnosisResolved",
    "NodeStatus",
    "Session",
    "open_cluster",
]
