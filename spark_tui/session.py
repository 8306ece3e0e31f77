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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_tui import policy
from spark_tui.clock import Clock
from spark_tui.errors import InputError, SparkTuiError
from spark_tui.events import ActionProgress, DiagnosisRaised, DiagnosisResolved, Event
from spark_tui.kb.diagnosis import DiagnosisSnapshot, DiagnosisView
from spark_tui.kb.loader import KnowledgeBase
from spark_tui.kb.matcher import Matcher
from spark_tui.kb.schema import Fix
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.state import NodeState
from spark_tui.nodes.transport import Transport
from spark_tui.recipes.plan import LaunchPlan
from spark_tui.recipes.revisions import RevisionStore
from spark_tui.remedy.fixes import Confirm, FixPlan, FixResult, RunEnvironment
from spark_tui.remedy.journal import Journal, UnfinishedRun, unfinished
from spark_tui.remedy.launch import AutoRelaunchGuard
from spark_tui.session_adopt import Adoption
from spark_tui.session_checks import Checks
from spark_tui.session_open import open_session
from spark_tui.session_plans import Plans
from spark_tui.session_report import Reports
from spark_tui.session_revisions import RecipeRevisions
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
        self._adopted: dict[str, Recipe] = {}  # recipes adopted from what runs, this session
        self.closing = threading.Event()  # set by close(): an action's waits end early
        # the named services this composition root hands its parts to
        self.adoption = Adoption(self)
        self.status_reader = StatusReader(self)
        self.reports = Reports(self)
        self.checks = Checks(self)
        self.plans = Plans(self)
        self.recipe_revisions = RecipeRevisions(self)
        self._closed = False

    # ---- opening and closing ---------------------------------------------------------
    # `Session.open(config, scenario=…, recipe=…, …)`: the only opener (session_open)
    open = classmethod(open_session)

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
        """Back to the recipe revision before the last patch (RecipeRevisions)."""
        return self.recipe_revisions.undo()

    def rollback_preview(self, recipe_id: str | None = None) -> tuple[Recipe, Served, str]:
        """(recipe in use, the launch that last served, the diff) (RecipeRevisions)."""
        return self.recipe_revisions.rollback_preview(recipe_id)

    def rollback_image_lines(self, served: Served) -> list[str]:
        """The image a rollback pins, and each node's copy of it (RecipeRevisions)."""
        return self.recipe_revisions.rollback_image_lines(served)

    def rollback(self, recipe_id: str | None = None) -> Recipe:
        """Back to what last served, as a new revision; journaled (RecipeRevisions)."""
        return self.recipe_revisions.rollback(recipe_id)

    # ---- the live monitor    # ---- the live monitor ----------------------------------------------------------------
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

    def diagnoses(self, include_resolved: bool = False) -> list[DiagnosisSnapshot]:
        """Diagnoses so far, newest first (active ones only unless asked), each frozen as it
        is now: nothing outside the monitor changes the book's records."""
        if self.monitor is None:
            return []
        out = self.monitor.snapshots()
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
        # a check wall (a setting) never kills a launch by itself; evidence taken at the
        # launch's own instant or before it (readings are judged as of when they were read)
        # is the last attempt's
        for d in self.diagnoses():
            if (
                d.severity == "error"
                and d.wall.kind != "check"
                and d.first_seen > self._last_launch_at
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

    def plan_fix(self, diagnosis: DiagnosisView, fix: Fix) -> FixPlan:
        """A wall's fix planned for this cluster and recipe (Plans: what the run runs)."""
        return self.plans.plan_fix(diagnosis, fix)

    def fix_lines(self, diagnosis: DiagnosisView, fix: Fix) -> list[str]:
        """A fix's commands as planned here, without the title line (Plans; cached)."""
        return self.plans.fix_lines(diagnosis, fix)

    def plan_launch(self, clean: bool | None = None) -> FixPlan:
        """(Re)launch the recipe in use (Plans)."""
        return self.plans.plan_launch(clean)

    def launch_cluster(self, recipe: Recipe | None) -> ClusterConfig:
        """The cluster as a launch plan sees it (Plans)."""
        return self.plans.launch_cluster(recipe)

    def plan_stop(self) -> FixPlan:
        """Stop the serving stack and Ray on every node (Plans)."""
        return self.plans.plan_stop()

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
        """Read-only preflight of every node (Checks)."""
        return self.checks.doctor()

    def fit(self, recipe: Recipe) -> tuple[FitReport, dict[str, str]]:
        """Whether a recipe's model fits each node's memory now (Checks)."""
        return self.checks.fit(recipe)

    def check_flags(self, recipe: Recipe) -> FlagReport:
        """The flags the recipe image's engine does not know (Checks). Journaled."""
        return self.checks.check_flags(recipe)

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
        diagnoses: Sequence[DiagnosisView] | None = None,
        versions: dict[str, dict[str, str]] | None = None,
    ) -> str:
        """The Markdown incident report of this session (Reports)."""
        return self.reports.report(diagnoses, versions)

    def export_report(self, diagnoses: Sequence[DiagnosisView] | None = None) -> Path:
        """Write the report where it outlives the session; its path (Reports)."""
        return self.reports.export_report(diagnoses)


__all__ = [
    "DiagnosisRaised",
    "DiagnosisResolved",
    "NodeStatus",
    "Session",
    "open_cluster",
]
