"""The live pipeline that every front end drives (the TUI, `watch --json`).

    monitor = ClusterMonitor(cluster, transports, kb, clock, emit)
    monitor.start()          # a thread per node: sample, emit, evaluate rules, repeat
    monitor.tail("spark1", "serve", "docker logs -f --tail 200 vllm")
    ...
    monitor.stop()

Events (spark_tui.events) go to `emit`, from worker threads: NodeSampled after
each round, ReachabilityChanged when a node drops or comes back, LogLines
batches (with marks for lines that matched a wall) and DiagnosisRaised. `emit`
must be thread-safe (Textual's post_message is).

Polls on completion: a node's next round is scheduled when its previous one
finished, so a slow or dead node never piles up sessions. Every log line of
every node goes through ONE shared MatchStream; metric and check walls through
the one RuleEngine (spark_tui.nodes.rules) after every round. A node that drops
is a state; its threads keep going and pick up when it comes back.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import queue
import threading
from collections.abc import Callable, Mapping

from spark_tui import shell
from spark_tui.clock import Clock
from spark_tui.events import DiagnosisRaised, Event, LogLines, NodeSampled, ReachabilityChanged
from spark_tui.kb.diagnosis import Diagnosis, DiagnosisBook
from spark_tui.kb.loader import KnowledgeBase
from spark_tui.kb.matcher import Matcher
from spark_tui.nodes import commands
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.parsers.dmon import DmonParser, DmonSample
from spark_tui.nodes.parsers.nccl import distinct_builds, parse_nccl_libraries
from spark_tui.nodes.parsers.serving import ServingTracker
from spark_tui.nodes.rules import RuleEngine, cluster_facts
from spark_tui.nodes.sampler import Sampler
from spark_tui.nodes.state import NcclLibrary, NodeState
from spark_tui.nodes.transport import Reachability, Transport

# log sources that are not the serving engine's log (they do not move log.silent_s)
NON_SERVING_SOURCES = ("kernel", "dmesg")
KERNEL_SOURCE = "kernel"
BATCH_LINES = 500
FLUSH_S = 0.1
HISTORY_ROUNDS = 600  # the readings kept per node for evidence (≥ 10 min at 1 s rounds)
REPEAT_EMIT_S = 1.0  # a diagnosis seen again is re-announced at most this often


class ClusterMonitor:
    """Watches every node of a cluster; see the module docstring."""

    def __init__(
        self,
        cluster: ClusterConfig,
        transports: Mapping[str, Transport],
        kb: KnowledgeBase,
        clock: Clock,
        emit: Callable[[Event], None],
        recipe_facts: Callable[[], dict] | None = None,
        period_s: float = 2.0,
        *,
        slow_every: int = 5,
        dmon: bool = True,
        auto_tail: bool = True,
        matcher_engine: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.transports = dict(transports)
        self.kb = kb
        self.clock = clock
        self.emit = emit
        self.recipe_facts = recipe_facts
        self.period_s = period_s
        self.dmon = dmon
        self.auto_tail = auto_tail
        self._book = DiagnosisBook()
        self._rules = RuleEngine(kb, self._book)
        self._matcher = Matcher(kb, engine=matcher_engine)
        self._match = self._matcher.stream()  # ONE stream for every node and source
        self._lock = threading.RLock()  # guards the book, the match stream, states, trackers
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._streams: dict[tuple[str, str], object] = {}
        self._tailing: set[tuple[str, str]] = set()
        self._lines: queue.Queue[tuple[str, str, str]] = queue.Queue(maxsize=100_000)
        head = cluster.head.name if cluster.nodes else None
        self._samplers = {
            n.name: Sampler(
                self.transports[n.name],
                n,
                clock,
                slow_every,
                extra_sections=self._metrics_sections if n.name == head else None,
            )
            for n in cluster.nodes
        }
        self._states: dict[str, NodeState] = {}
        self._reach: dict[str, Reachability] = {}
        self._serving = {n.name: ServingTracker() for n in cluster.nodes}
        self._dmon: dict[str, dict[int, tuple[DmonSample, float]]] = {
            n.name: {} for n in cluster.nodes
        }
        self._nvrm_seen: dict[str, set[str]] = {n.name: set() for n in cluster.nodes}
        self._last_emit: dict[tuple[str, str], float] = {}
        self._boot_ids: dict[str, str] = {}
        self._reboot_expected: set[str] = set()
        self._rebooted_unasked: set[str] = set()
        self._started = False
        # once per launch: the serving container's libnccl.so.2 files (container id, files)
        self._nccl: dict[str, tuple[str, tuple[NcclLibrary, ...]]] = {}
        self._last_reachable: dict[str, float] = {}  # time of each node's last good round
        self._history: dict[str, collections.deque[tuple[float, dict[str, object]]]] = {
            n.name: collections.deque(maxlen=HISTORY_ROUNDS) for n in cluster.nodes
        }

    # ------------------------------------------------------------------ public
    def start(self) -> None:
        """Start a sampling thread per node (and dmon streams, and the log flusher)."""
        if self._started:
            return
        self._started = True
        self._spawn("log-flush", self._flush_loop)
        for node in self.cluster.nodes:
            self._spawn(f"sample:{node.name}", self._node_loop, node.name)
            if self.dmon:
                self._spawn(f"dmon:{node.name}", self._dmon_loop, node.name)

    def stop(self, close_transports: bool = True) -> None:
        """Stop every thread and stream (and close the transports unless told not to)."""
        self._stop.set()
        with self._lock:
            streams = list(self._streams.values())
        for s in streams:
            with contextlib.suppress(Exception):
                s.close()  # type: ignore[attr-defined]
        if close_transports:
            for t in self.transports.values():
                with contextlib.suppress(Exception):
                    t.close()
        for th in self._threads:
            if th is not threading.current_thread():
                th.join(timeout=10)
        self._drain()

    def tail(self, node: str, source: str, command: str) -> None:
        """Follow a long-running command's output (a log tail) on a node; each line goes
        through the matcher. Reopened when it ends while the monitor runs (a node that
        dropped and came back). Tailing the same (node, source) twice does nothing."""
        self.cluster.node(node)  # an unknown node is an InputError
        with self._lock:
            if (node, source) in self._tailing:
                return
            self._tailing.add((node, source))
        self._spawn(f"tail:{node}:{source}", self._tail_loop, node, source, command)

    def feed_line(self, node: str, source: str, line: str) -> None:
        """A log line that arrived another way (the simulator, a file): matched at once."""
        self._ingest(node, source, [line])

    def flush(self) -> None:
        """Match and emit every tailed line received so far, now (the flusher thread does
        this every 0.1 s after start(); callers that step a simulation call it themselves)."""
        self._drain()

    def diagnoses(self) -> DiagnosisBook:
        """Every diagnosis so far, from logs and readings (read it under no lock: a snapshot
        may be a round behind)."""
        return self._book

    def states(self) -> dict[str, NodeState]:
        """The latest NodeState of every node sampled so far."""
        with self._lock:
            return dict(self._states)

    def reachability(self) -> dict[str, Reachability]:
        with self._lock:
            return dict(self._reach)

    def expect_reboot(self, node: str) -> None:
        """spark-tui itself is rebooting this node: its next boot id change is asked for."""
        with self._lock:
            self._reboot_expected.add(node)

    def sample_once(self, node: str) -> NodeState:
        """One round for one node now, in the caller's thread (events and rules as usual)."""
        return self._round(node)

    def evaluate(self) -> list[DiagnosisRaised]:
        """Evaluate the reading rules over the latest states now (done after every round)."""
        recipe = self._recipe()
        with self._lock:
            now = self.clock.now()
            states = dict(self._states)
            firings = self._rules.evaluate_states(states, now, recipe)
        raised = [DiagnosisRaised(f.diagnosis, f.new, now) for f in firings]
        for event in raised:
            self.emit(event)
        return raised

    def last_reading_before_silence(self, node: str) -> float | None:
        """Clock time of the node's last good round (when it went silent, the last one before)."""
        with self._lock:
            return self._last_reachable.get(node)

    def recent_readings(self, node: str, seconds: float = 300.0) -> list[tuple[float, dict]]:
        """(time, facts) of the node's rounds in the last `seconds` (the stall's evidence)."""
        with self._lock:
            rows = list(self._history.get(node, ()))
        if not rows:
            return []
        newest = rows[-1][0]
        return [(t, f) for t, f in rows if t >= newest - seconds]

    def nccl_libraries(self, node: str) -> tuple[NcclLibrary, ...] | None:
        """The libnccl.so.2 files read in this launch's serving container (None: not read)."""
        with self._lock:
            got = self._nccl.get(node)
        return got[1] if got else None

    def facts(self, node: str | None = None) -> dict[str, object]:
        """Facts as the rules see them: the node's (when named), the cluster's and the recipe's."""
        with self._lock:
            states = dict(self._states)
        f: dict[str, object] = {**(self._recipe() or {}), **cluster_facts(states)}
        if node is not None and node in states and states[node].reachable:
            f.update(states[node].facts())
        return f

    def facts_by_node(self) -> dict[str, dict[str, object]]:
        """Every node's facts (with the cluster's and the recipe's): a log wall's cause
        may hold on another node than the one that printed the line."""
        with self._lock:
            names = [n for n, st in self._states.items() if st.reachable]
        return {n: self.facts(n) for n in names}

    # ------------------------------------------------------------------ rounds
    def _spawn(self, name: str, target: Callable, *args: object) -> None:
        th = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(th)
        th.start()

    def _real_wait(self, clock_seconds: float) -> bool:
        """Idle clock seconds (the clock says how long that is in real time); True when stopping."""
        return self.clock.wait(clock_seconds, self._stop)

    def _node_loop(self, node: str) -> None:
        while not self._stop.is_set():
            try:
                self._round(node)
            except Exception as exc:  # a bug must not kill the node's pane; say so in its state
                with self._lock:
                    self._states[node] = NodeState(
                        node, self.clock.now(), reachable=False, unavailable={"monitor": repr(exc)}
                    )
            if self._real_wait(self.period_s):
                return

    def _round(self, node: str) -> NodeState:
        state = self._samplers[node].next_round()
        transport = self.transports[node]
        with self._lock:
            if state.reachable:
                state = self._merge_live(node, state)
            self._states[node] = state
            reach = transport.state
            if not state.reachable and reach.reachable:  # the round failed though the link is up
                reach = Reachability(False, state.time, state.unavailable.get("node", ""), True)
            old = self._reach.get(node)
            changed = old is None or old.reachable != reach.reachable
            if changed:
                self._reach[node] = reach
        if changed:  # before the sample, so a front end knows the state the sample is in
            self.emit(ReachabilityChanged(node, reach))
        self.emit(NodeSampled(node, state))
        if state.reachable:
            self._after_round(node, state)
            with self._lock:
                self._last_reachable[node] = state.time
                self._history[node].append((state.time, state.facts()))
        self.evaluate()
        return state

    def _merge_live(self, node: str, state: NodeState) -> NodeState:
        """Fold the live streams into a round: the serving progress and fresh dmon figures."""
        serving = self._serving[node].state
        gpus = state.gpus
        fresh = self.clock.now() - 3 * max(self.period_s, 1.0)
        live = {g: s for g, (s, at) in self._dmon[node].items() if at >= fresh}
        if live and gpus:
            gpus = tuple(
                dataclasses.replace(
                    g,
                    sm_pct=live[g.index].sm_pct if live[g.index].sm_pct is not None else g.sm_pct,
                    mem_bw_pct=live[g.index].mem_bw_pct
                    if live[g.index].mem_bw_pct is not None
                    else g.mem_bw_pct,
                )
                if g.index in live
                else g
                for g in gpus
            )
        extra = dict(state.extra_facts)
        if state.boot_id is not None:
            before = self._boot_ids.get(node)
            if before is not None and before != state.boot_id:
                if node in self._reboot_expected:
                    self._reboot_expected.discard(node)
                    self._rebooted_unasked.discard(node)
                else:  # a reset or power loss nobody asked for (node-unexpected-reboot)
                    self._rebooted_unasked.add(node)
            self._boot_ids[node] = state.boot_id
            extra["boot.changed_unasked"] = node in self._rebooted_unasked
        nccl = self._nccl.get(node)
        if nccl is not None and any(
            c.id == nccl[0] and c.state == "running" for c in state.containers
        ):
            extra["nccl.library_builds"] = distinct_builds(nccl[1], self._preload())
            extra["nccl.library_files"] = len(nccl[1])
        return dataclasses.replace(state, serving=serving, gpus=gpus, extra_facts=extra)

    def _after_round(self, node: str, state: NodeState) -> None:
        # new NVRM kernel lines go through the matcher like any log (nvrm-oom is a log wall)
        seen = self._nvrm_seen[node]
        fresh = [line for line in state.nvrm_lines if line not in seen]
        if fresh:
            seen.update(fresh)
            self._ingest(node, KERNEL_SOURCE, fresh)
        self._read_nccl_once(node, state)
        if self.auto_tail and not self._stop.is_set():
            for c in state.containers:
                if c.state == "running" and _is_serving_name(c.name, c.image):
                    command = shell.fill(commands.SERVE_LOG_TAIL, {"container": c.name})
                    self.tail(node, f"container:{c.name}", command)

    def _read_nccl_once(self, node: str, state: NodeState) -> None:
        """Once per launch (a serving container not read before): its libnccl.so.2 files."""
        serving = [
            c
            for c in state.containers
            if c.state == "running" and _is_serving_name(c.name, c.image)
        ]
        if not serving or self._stop.is_set():
            return
        c = serving[0]
        with self._lock:
            done = self._nccl.get(node)
        if done is not None and done[0] == c.id:
            return
        command = shell.fill(commands.NCCL_LIBRARIES, {"container": c.name})
        try:
            res = self.transports[node].run(command, timeout=60.0)
        except Exception:  # unreachable now: read it on a later round
            return
        libs = parse_nccl_libraries(res.stdout)
        if isinstance(libs, Unparseable) or (not res.ok and not libs):
            return  # the container went away or has no find/sha256sum: try next launch
        with self._lock:
            self._nccl[node] = (c.id, libs)
            # the round just merged did not have them yet
            if node in self._states:
                st = self._states[node]
                extra = dict(st.extra_facts)
                extra["nccl.library_builds"] = distinct_builds(libs, self._preload())
                extra["nccl.library_files"] = len(libs)
                self._states[node] = dataclasses.replace(st, extra_facts=extra)

    def _preload(self) -> str | None:
        """The serve process's LD_PRELOAD (a libnccl there is the one build that runs)."""
        value = (self._recipe() or {}).get("recipe.env.LD_PRELOAD")
        return str(value) if value else None

    def _metrics_sections(self) -> dict[str, str]:
        """The head's extra section: the engine's /metrics on the recipe's serve port."""
        recipe = self._recipe() or {}
        port = recipe.get("recipe.serve_args.--port")
        if port is None:
            port = 30000 if recipe.get("recipe.engine") == "sglang" else 8000
        try:
            port = int(float(port))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            port = 8000
        return {commands.METRICS_SECTION: shell.fill(commands.METRICS, {"port": port})}

    def _recipe(self) -> dict | None:
        if self.recipe_facts is None:
            return None
        try:
            return dict(self.recipe_facts())
        except Exception:  # a recipe being edited must not stop the watch
            return None

    # ------------------------------------------------------------------ streams
    def _dmon_loop(self, node: str) -> None:
        transport = self.transports[node]
        while not self._stop.is_set():
            got = 0
            try:
                stream = transport.stream(commands.DMON)
            except Exception:  # unreachable (or a transport bug): try again next period
                if self._real_wait(self.period_s):
                    return
                continue
            with self._lock:
                self._streams[(node, "dmon")] = stream
            parser = DmonParser()
            try:
                for line in stream:
                    sample = parser.feed(line)
                    if sample is not None:
                        got += 1
                        with self._lock:
                            self._dmon[node][sample.gpu] = (sample, self.clock.now())
                    if self._stop.is_set():
                        break
            finally:
                stream.close()
            # no samples at all: no nvidia-smi (or no GPU) here; try again much later
            if self._real_wait(self.period_s if got else 30 * self.period_s):
                return

    def _tail_loop(self, node: str, source: str, command: str) -> None:
        transport = self.transports[node]
        while not self._stop.is_set():
            try:
                stream = transport.stream(command)
            except Exception:  # unreachable (or a transport bug): try again next period
                if self._real_wait(self.period_s):
                    return
                continue
            with self._lock:
                self._streams[(node, source)] = stream
            try:
                for line in stream:
                    # the front end far behind: drop lines, never block the node's channel
                    with contextlib.suppress(queue.Full):
                        self._lines.put((node, source, line), timeout=5)
                    if self._stop.is_set():
                        break
            finally:
                stream.close()
            if self._real_wait(self.period_s):
                return

    def _flush_loop(self) -> None:
        while not self._stop.is_set():
            try:
                first = self._lines.get(timeout=FLUSH_S)
            except queue.Empty:
                continue
            self._drain(first)

    def _drain(self, first: tuple[str, str, str] | None = None) -> None:
        batch: dict[tuple[str, str], list[str]] = {}
        item = first
        count = 0
        while True:
            if item is not None:
                batch.setdefault((item[0], item[1]), []).append(item[2])
                count += 1
            if count >= BATCH_LINES:
                break
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                break
        for (node, source), lines in batch.items():
            self._ingest(node, source, lines)

    def _ingest(self, node: str, source: str, lines: list[str]) -> None:
        """Match lines against the log walls; emit one LogLines batch and the diagnoses."""
        self.cluster.node(node)
        key = f"{node}:{source}"
        raised: list[DiagnosisRaised] = []
        marks: list[tuple[int, str, str]] = []
        facts_by_node = self.facts_by_node()
        with self._lock:
            now = self.clock.now()
            first_no = self._match.line_count(key) + 1
            serving = source not in NON_SERVING_SOURCES
            for i, line in enumerate(lines):
                if serving:
                    self._serving[node].feed(line, now)
                for hit in self._match.feed_line(key, line):
                    marks.append((i, hit.wall.id, hit.wall.severity))
                    if serving and hit.wall.severity == "error":
                        self._serving[node].mark_crashed()
                    diag, new = self._book.add(
                        hit.wall,
                        key,
                        hit.line_no,
                        hit.evidence,
                        node=node,
                        now=now,
                        facts_by_node=facts_by_node,
                    )
                    if self._announce(diag, new, now):
                        raised.append(DiagnosisRaised(diag, new, now))
            if serving and node in self._states:  # the pane shows progress without a round
                self._states[node] = dataclasses.replace(
                    self._states[node], serving=self._serving[node].state
                )
        self.emit(LogLines(node, source, tuple(lines), first_no, tuple(marks)))
        for event in raised:
            self.emit(event)

    def _announce(self, diag: Diagnosis, new: bool, now: float) -> bool:
        key = (diag.wall.id, diag.source)
        if new or now - self._last_emit.get(key, float("-inf")) >= REPEAT_EMIT_S:
            self._last_emit[key] = now
            return True
        return False


def _is_serving_name(name: str, image: str) -> bool:
    text = f"{name} {image}".lower()
    return any(w in text for w in ("vllm", "sglang"))
