"""The live pipeline that every front end drives (the TUI, `watch --json`).

    monitor = ClusterMonitor(cluster, transports, kb, clock, emit)
    monitor.start()          # rounds of every node: sample, emit, evaluate rules, repeat
    monitor.tail("spark1", "serve", "docker logs -f --tail 200 vllm")
    ...
    monitor.stop()

Events (spark_tui.events) go to `emit`, from worker threads: NodeSampled after
each round, ReachabilityChanged when a node drops or comes back, LogLines
batches (with marks for lines that matched a wall), DiagnosisRaised and
DiagnosisResolved. `emit` must be thread-safe (Textual's post_message is).

A diagnosis has a life: a readings wall resolves when its rules stop holding; a
launch starts a new attempt (`new_attempt`) that makes the log walls of earlier
attempts history; a verified fix resolves its wall (`resolve_fixed`). The serving
phase of every node comes from that node's log, or, for a node whose engine rank
logs through the head (Ray), from the head while the node takes part.

Polls on completion: a node's next round is scheduled when its previous one
finished, so a slow or dead node never piles up sessions. The threads are bounded
whatever the number of nodes (spark_tui.nodes.workers): rounds and stream opens run in a
pool of at most MAX_WORKERS threads (one per node and stream open up to that, so 2-3
nodes wait for nothing), every stream (dmon, log tails) is read by ONE pump thread, and
one flusher matches the lines. Every log line of
every node goes through ONE shared MatchStream; metric and check walls through
the one RuleEngine (spark_tui.nodes.rules) after every round. A node that drops
is a state; its rounds keep going and pick up when it comes back.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import queue
import shlex
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence

from spark_tui import shell
from spark_tui.clock import Clock
from spark_tui.events import (
    DiagnosisFixed,
    DiagnosisRaised,
    DiagnosisResolved,
    Event,
    LogLines,
    NodeSampled,
    ReachabilityChanged,
)
from spark_tui.kb.diagnosis import Diagnosis, DiagnosisBook, DiagnosisSnapshot
from spark_tui.kb.loader import KnowledgeBase
from spark_tui.kb.matcher import Matcher
from spark_tui.kb.source import Source
from spark_tui.nodes import commands
from spark_tui.nodes.cluster import ClusterConfig
from spark_tui.nodes.parsers import Unparseable
from spark_tui.nodes.parsers.dmon import DmonParser, DmonSample
from spark_tui.nodes.parsers.nccl import distinct_builds, parse_nccl_libraries
from spark_tui.nodes.parsers.processes import EngineOutput, parse_engine_output
from spark_tui.nodes.parsers.serving import ServingTracker
from spark_tui.nodes.rules import RuleEngine, cluster_facts
from spark_tui.nodes.sampler import Sampler
from spark_tui.nodes.state import NcclLibrary, NodeState, ServingState
from spark_tui.nodes.transport import LineStream, Reachability, Transport
from spark_tui.nodes.workers import StreamPump, WorkerPool
from spark_tui.redact import redact
from spark_tui.untrusted import clean_line

# queued in a source's place in the line order: its tail reads another file from here on
NEW_FILE = "\x00spark-tui: new file\x00"

# log sources that are not the serving engine's log (they do not move log.silent_s)
NON_SERVING_SOURCES = ("kernel", "dmesg")
KERNEL_SOURCE = "kernel"
BATCH_LINES = 500
FLUSH_S = 0.1
HISTORY_ROUNDS = 600  # the readings kept per node for evidence (≥ 10 min at 1 s rounds)
REPEAT_EMIT_S = 1.0  # a diagnosis seen again is re-announced at most this often


IDLE_FACTOR = 3.0  # an idle node (nothing of the stack up) is read every 3 periods
# a log tail that ended having read nothing (`docker exec` into a container that is not there)
# is opened again after 1, 2, 4 … periods, never more than this many; a launch, or the
# container it names appearing in a round, opens it again at once
TAIL_BACKOFF_MAX = 16
# threads for rounds and stream opens: 2 per node (a round and a stream open at once, as when
# every node had its own threads) plus one, never more than this, whatever the node count
MAX_WORKERS = 12


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
        matcher: Matcher | None = None,
        max_queued_lines: int = 100_000,
        idle_factor: float = IDLE_FACTOR,
    ) -> None:
        self.cluster = cluster
        self.transports = dict(transports)
        self.kb = kb
        self.clock = clock
        self.emit = emit
        self.recipe_facts = recipe_facts
        self.period_s = period_s
        # a node where nothing of the stack runs is read less often (it costs the node CPU
        # every round); a launch, or anyone waiting for rounds, hurries every node at once
        self.idle_period_s = period_s * max(1.0, idle_factor)
        self._pool = WorkerPool(min(2 * len(cluster.nodes) + 1, MAX_WORKERS), "monitor")
        self._pump = StreamPump("monitor-streams")
        self._workers_started = False
        self._eager = 0  # callers of wait_rounds waiting now
        self.dmon = dmon
        self.auto_tail = auto_tail
        self._book = DiagnosisBook()
        self._rules = RuleEngine(kb, self._book)
        self._matcher = matcher or Matcher(kb)  # the session's, else one of this kb
        self._match = self._matcher.stream()  # ONE stream for every node and source
        self._lock = threading.RLock()  # guards the book, the match stream, states, trackers
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._streams: dict[tuple[str, str], LineStream] = {}
        self._tailing: dict[tuple[str, str], str] = {}  # (node, source) -> command
        # (node, source) -> the launch attempt its tail was last opened in
        self._opened_in: dict[tuple[str, str], int] = {}
        # (node, source) -> tails in a row that ended having read nothing (its back-off); the
        # container id that last ended a back-off
        self._tail_misses: dict[tuple[str, str], int] = {}
        self._tail_reset_by: dict[tuple[str, str], str] = {}
        # (node, text, event) a caller waits on (expect_line); dropped with the event
        self._expected: list[tuple[str, str, weakref.ref[threading.Event]]] = []
        self.attempt = 0  # launch attempts seen by this monitor (new_attempt)
        # lines received, not matched yet: bounded, and full means the tail waits (the node's
        # channel holds the rest) — no line is ever dropped before the matcher has seen it
        self._lines: queue.Queue[tuple[str, str, str]] = queue.Queue(maxsize=max_queued_lines)
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
        # per diagnosis: when it was last announced, and its severity and confidence then
        self._last_emit: dict[tuple[str, str], tuple[float, str, str]] = {}
        self._boot_ids: dict[str, str] = {}
        self._reboot_expected: set[str] = set()
        self._rebooted_unasked: set[str] = set()
        self._started = False
        # once per launch: the serving container's libnccl.so.2 files (container id, files);
        # a container whose read failed is not read again (_nccl_failed)
        self._nccl: dict[str, tuple[str, tuple[NcclLibrary, ...]]] = {}
        self._nccl_failed: dict[str, str] = {}
        self._own_log: dict[str, bool] = {n.name: False for n in cluster.nodes}
        self._stack_seen: set[str] = set()  # nodes where the stack was seen up this attempt
        self._engines_read: set[tuple[str, int]] = set()  # engine processes whose log we found
        self._last_reachable: dict[str, float] = {}  # time of each node's last good round
        self._round_no: dict[str, int] = {n.name: 0 for n in cluster.nodes}
        self._round_cv = threading.Condition()
        self._unevaluated: set[str] = set()  # nodes whose last round the rules have not seen
        self._evaluating = False
        self._history: dict[str, collections.deque[tuple[float, dict[str, object]]]] = {
            n.name: collections.deque(maxlen=HISTORY_ROUNDS) for n in cluster.nodes
        }

    # ------------------------------------------------------------------ public

    @property
    def matcher(self) -> Matcher:
        """The matcher every log line goes through (the session's, handed to a launch too)."""
        return self._matcher

    def start(self) -> None:
        """Start every node's rounds (and dmon streams, the log flusher, and the tails of the
        logs cluster.yaml names)."""
        if self._started:
            return
        self._started = True
        self._spawn("log-flush", self._flush_loop)
        for node in self.cluster.nodes:
            for log in node.logs:
                self.tail(node.name, log.name, log_source_command(log.kind, log.value))
        self._start_workers()
        for node in self.cluster.nodes:
            self._pool.at(0.0, ("round", node.name), functools.partial(self._round_job, node.name))
            if self.dmon:
                self._pool.at(
                    0.0, ("dmon", node.name), functools.partial(self._open_dmon, node.name)
                )

    def stop(self, close_transports: bool = True) -> None:
        """Stop every thread and stream (and close the transports unless told not to)."""
        self._stop.set()
        self._pool.stop(join=False)  # no round or open starts from now on
        self._pump.stop()  # closes every stream it follows
        with self._lock:
            streams = list(self._streams.values())
        for s in streams:  # opened as the pump stopped
            with contextlib.suppress(Exception):
                s.close()
        if close_transports:
            for t in self.transports.values():
                with contextlib.suppress(Exception):
                    t.close()
        self._pool.stop()  # waits for the rounds running now (the transports are closed)
        for th in self._threads:
            if th is not threading.current_thread():
                th.join(timeout=10)
        self._drain()

    def tail(self, node: str, source: str, command: str) -> None:
        """Follow a long-running command's output (a log tail) on a node; each line goes
        through the matcher. Reopened when it ends while the monitor runs (a node that
        dropped and came back). Tailing (node, source) again with another command
        replaces the command; with the same one it does nothing."""
        self.cluster.node(node)  # an unknown node is an InputError
        with self._lock:
            old = self._tailing.get((node, source))
            if old == command:
                return
            self._tailing[(node, source)] = command
            stream = self._streams.get((node, source))
        if old is None:
            self._start_workers()
            self._pool.at(0.0, ("tail", node, source), lambda: self._open_tail(node, source))
        else:
            self._resume_tails([(node, source)])  # a back-off was for the old command
            if stream is not None:
                self._pump.close(stream)  # its end reopens it with the new command

    def follow(self, log_sources: Mapping[str, Sequence[str]]) -> None:
        """Tail a launch plan's log sources (node -> commands): the serve log inside the
        head container, the containers' own logs. Until the launch creates a container,
        docker's "No such container" is noise, not a log line (the tail retries)."""
        for node, cmds in log_sources.items():
            serve = 0
            for command in cmds:
                words = command.split()
                if words[:2] == ["docker", "logs"]:  # the monitor's own name for it: no doubles
                    source = f"container:{words[-1]}"
                else:
                    serve += 1
                    source = "serve" if serve == 1 else f"serve{serve}"
                self.tail(node, source, f"{command} 2>/dev/null")

    def new_attempt(self, nodes: Iterable[str] = ()) -> None:
        """A launch begins: the log walls seen so far become history (resolved), and the
        serving phase of its nodes starts over."""
        self._drain()  # lines already received belong to the attempt that printed them
        self.hurry()  # the launch's nodes are read at the launch's pace from now on
        now = self.clock.now()
        with self._lock:
            self.attempt += 1
            resolved = [
                d.snapshot()
                for d in self._book
                if d.resolved_at is None  # a fixed one too: this launch proves it
                and not d.source.from_readings
                and d.resolve(now, f"from launch attempt {max(d.attempt, 1)}; a new one began")
            ]
            for node in nodes:
                if node in self._serving:
                    self._serving[node].reset("starting", now)
                    self._own_log[node] = False
                    self._stack_seen.discard(node)
            launched = set(nodes)
            waiting = [k for k in self._tail_misses if k[0] in launched]
        self._resume_tails(waiting)  # the launch's logs are read at once, not after a back-off
        for d in resolved:
            self.emit(DiagnosisResolved(d, now))

    def stopped(self, nodes: Iterable[str]) -> None:
        """spark-tui stopped the stack on these nodes: nothing serves there now."""
        now = self.clock.now()
        with self._lock:
            for node in nodes:
                if node in self._serving:
                    self._serving[node].reset("stopped", now)
                    self._own_log[node] = False
                    self._stack_seen.discard(node)

    def resolve_fixed(self, wall_id: str, how: str, last_launch_at: float | None) -> None:
        """A fix for this wall ran and verified: its readings walls are resolved (raised
        again at once if their readings still hold), and so are its log walls whose evidence
        predates the last launch (a relaunch already made them history); a log wall seen in
        this launch is fixed, waiting for the relaunch that proves it."""
        now = self.clock.now()
        with self._lock:
            resolved, fixed = [], []
            for d in self._book:
                if d.wall.id != wall_id or not d.active:
                    continue
                if d.source.from_readings:
                    self._rules.forget_active(d.wall.id, d.source.subject)
                elif last_launch_at is None or d.first_seen >= last_launch_at:
                    if d.mark_fixed(now, f"fixed: {how}; the next launch proves it"):
                        fixed.append(d.snapshot())
                    continue
                if d.resolve(now, f"fixed: {how}"):
                    resolved.append(d.snapshot())
        for d in fixed:
            self.emit(DiagnosisFixed(d, now))
        for d in resolved:
            self.emit(DiagnosisResolved(d, now))

    def adopt(self, states: Mapping[str, NodeState]) -> None:
        """Readings taken by someone else (the doctor) count as a round of each node."""
        with self._lock:
            for name, state in states.items():
                if state.reachable and name in self._samplers:
                    self._states[name] = self._merge_live(name, state)
        self.evaluate()

    def expect_line(self, node: str, text: str) -> threading.Event:
        """An event set when a line holding `text` arrives from `node`, in any of its logs,
        from now on (a launch's wait for its ready line looks at once); forgotten when the
        caller lets go of the event."""
        event = threading.Event()
        with self._lock:
            self._expected = [e for e in self._expected if e[2]() is not None]
            self._expected.append((node, text, weakref.ref(event)))
        return event

    def feed_line(self, node: str, source: str, line: str) -> None:
        """A log line that arrived another way (the simulator, a file): matched at once."""
        self._ingest(node, source, [line])

    def flush(self) -> None:
        """Match and emit every tailed line received so far, now (the flusher thread does
        this every 0.1 s after start(); callers that step a simulation call it themselves)."""
        self._drain()

    def diagnoses(self) -> DiagnosisBook:
        """The live book of diagnoses (the monitor and its rules change it: callers outside
        the monitor read `snapshots()`)."""
        return self._book

    def snapshots(self) -> list[DiagnosisSnapshot]:
        """Every diagnosis so far, newest first, each frozen as it is now (under the lock:
        no half-made change)."""
        with self._lock:
            return [d.snapshot() for d in self._book.newest_first()]

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
        facts_by_node = self.facts_by_node()
        with self._lock:
            states = dict(self._states)
            # the rules judge readings as of when they were taken: a round that read the
            # nodes before a relaunch and is evaluated after it started says nothing new
            # about the relaunch (a launch's fatal-wall check compares with its start)
            now = max((s.time for s in states.values()), default=None) or self.clock.now()
            firings = self._rules.evaluate_states(states, now, recipe)
            resolved = [d.snapshot() for d in self._rules.resolved]
            for f in firings:
                if f.new:
                    f.diagnosis.attempt = self.attempt
            confirmed = self._book.confirm_with(facts_by_node)  # readings now agree with the log
            # what the events carry: each diagnosis as it is now, frozen
            raised = [DiagnosisRaised(f.diagnosis.snapshot(), f.new, now) for f in firings]
            raised += [DiagnosisRaised(d.snapshot(), False, now) for d in confirmed]
        for event in raised:
            self.emit(event)
        for snap in resolved:
            self.emit(DiagnosisResolved(snap, now))
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

    def _start_workers(self) -> None:
        """The pool (rounds, stream opens) and the stream pump: started once, on first need."""
        with self._lock:
            if self._workers_started or self._stop.is_set():
                return
            self._workers_started = True
        self._pool.start()
        self._pump.start()
        self._threads += self._pool.threads
        if self._pump.thread is not None:
            self._threads.append(self._pump.thread)

    def _later(self, clock_seconds: float, key: tuple[str, ...], job: Callable[[], None]) -> None:
        """Run `job` in the pool after this many clock seconds (unless stopping)."""
        if not self._stop.is_set():
            self._pool.at(self.clock.real_seconds(clock_seconds), key, job)

    def _round_job(self, node: str) -> None:
        """One round of a node, then its next one planned (a slow node holds one thread)."""
        if self._stop.is_set():
            return
        try:
            self._round(node, evaluate=False)
        except Exception as exc:  # a bug must not kill the node's pane; say so in its state
            with self._lock:
                self._states[node] = NodeState(
                    node, self.clock.now(), reachable=False, unavailable={"monitor": repr(exc)}
                )
        self._evaluate_after(node)
        with self._lock:
            state = self._states.get(node)
            idle = state is not None and state.reachable and not state.stack_up
        with self._round_cv:
            idle = idle and not self._eager
        period = self.idle_period_s if idle else self.period_s
        self._later(period, ("round", node), lambda: self._round_job(node))

    def hurry(self) -> None:
        """Every node's next round now (a launch began, or a caller waits for rounds)."""
        self._pool.hurry([("round", n.name) for n in self.cluster.nodes])

    def _round(self, node: str, evaluate: bool = True) -> NodeState:
        state = self._samplers[node].next_round()
        transport = self.transports[node]
        with self._lock:
            if state.reachable:
                state = self._merge_live(node, state)
            before = self._states.get(node)
            if before is not None and before.time > state.time:
                state = before  # a round begun earlier ended later: the newer reading stays
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
        if not evaluate:
            return state
        self.evaluate()
        with self._round_cv:
            self._round_no[node] += 1
            self._round_cv.notify_all()
        return state

    def _evaluate_after(self, node: str) -> None:
        """The rules over every node after this node's round: one evaluation (in the pool)
        covers every round that finished before it began, so 500 nodes do not evaluate
        500 nodes' facts 500 times a period. A round counts (wait_rounds) once evaluated."""
        with self._round_cv:
            self._unevaluated.add(node)
            if self._evaluating:
                return
            self._evaluating = True
        self._pool.at(0.0, ("evaluate",), self._evaluate_job)

    def _evaluate_job(self) -> None:
        while True:
            with self._round_cv:
                nodes, self._unevaluated = self._unevaluated, set()
                if not nodes or self._stop.is_set():
                    self._evaluating = False
                    self._round_cv.notify_all()
                    return
            try:
                self.evaluate()
            finally:
                with self._round_cv:
                    for node in nodes:
                        self._round_no[node] += 1
                    self._round_cv.notify_all()

    def wait_rounds(self, n: int = 1, timeout: float = 120.0) -> bool:
        """Wait (real seconds, at most `timeout`) until every node finished n more rounds,
        then match the lines received so far; False on the timeout."""
        with self._round_cv:
            target = {k: v + n for k, v in self._round_no.items()}
            self._eager += 1  # every node at the busy pace while someone waits for rounds
        self.hurry()
        try:
            with self._round_cv:
                done = self._round_cv.wait_for(
                    lambda: (
                        self._stop.is_set()
                        or all(self._round_no[k] >= t for k, t in target.items())
                    ),
                    timeout,
                )
        finally:
            with self._round_cv:
                self._eager -= 1
        self._drain()
        return bool(done)

    def _serving_of(self, node: str, state: NodeState) -> ServingState:
        """A node's serving phase: from its own serving log; a node whose engine rank logs
        through the head (no engine line of its own in this attempt) shows the head's
        progress while it takes part. Where nothing of the stack runs any more (no serving
        or Ray container up, no engine process), it is stopped — or crashed, if it was."""
        own = self._serving[node].state
        if not state.stack_up:
            if node in self._stack_seen:  # it was up in this attempt and is gone now
                return own if own.phase in ("crashed", "stopped") else ServingState()
            return own  # nothing seen of the stack here: only its own log can say
        self._stack_seen.add(node)
        head = self.cluster.head.name
        if node == head or self._own_log.get(node) or head not in self._serving:
            return own
        h = self._serving[head].state
        return dataclasses.replace(h, tok_s=None, requests_running=None)

    def _merge_live(self, node: str, state: NodeState) -> NodeState:
        """Fold the live streams into a round: the serving progress and fresh dmon figures."""
        serving = self._serving_of(node, state)
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
        self._attach_engine_log(node, state)
        self._resume_tails_of_new_containers(node, state)
        if self.auto_tail and not self._stop.is_set():
            for c in state.containers:
                if c.state == "running" and _is_serving_name(c.name, c.image):
                    command = shell.fill(commands.SERVE_LOG_TAIL, {"container": c.name})
                    self.tail(node, f"container:{c.name}", command)

    def _resume_tails_of_new_containers(self, node: str, state: NodeState) -> None:
        """A tail backing off (its container was not there) whose container now runs (a launch
        by someone else, a container started by hand): opened again at once, once per
        container — a container whose tail fails anyway is not retried every round."""
        running = {c.name: c.id or c.name for c in state.containers if c.state == "running"}
        if not running:
            return
        with self._lock:
            waiting = [
                (key, self._tailing.get(key, "")) for key in self._tail_misses if key[0] == node
            ]
            resume = []
            for key, command in waiting:
                words = set(_words(command))
                for name, cid in running.items():
                    if name in words and self._tail_reset_by.get(key) != cid:
                        self._tail_reset_by[key] = cid
                        resume.append(key)
                        break
        self._resume_tails(resume)

    def _resume_tails(self, keys: Iterable[tuple[str, str]]) -> None:
        """These tails' back-off forgotten: opened again now (if they wait to be)."""
        keys = list(keys)
        if not keys:
            return
        with self._lock:
            for key in keys:
                self._tail_misses.pop(key, None)
        self._pool.hurry([("tail", *key) for key in keys])

    def _attach_engine_log(self, node: str, state: NodeState) -> None:
        """An engine found running (whoever started it) has its log followed: the file its
        output goes to, its container's output, or its systemd unit — once per process."""
        engine = state.engine
        if engine is None or not self.auto_tail or self._stop.is_set():
            return
        with self._lock:
            if (node, engine.pid) in self._engines_read:
                return
            self._engines_read.add((node, engine.pid))
            tailed = list(self._tailing.items())
        command = shell.fill(commands.ENGINE_OUTPUT, {"pid": engine.pid})
        try:
            res = self.transports[node].run(command, timeout=15.0)
        except Exception:  # unreachable now: try again next round
            with self._lock:
                self._engines_read.discard((node, engine.pid))
            return
        out = parse_engine_output(res.stdout)
        if not out.real_engine:  # a word in its argv, not an engine: nothing of it is read
            return
        tail = engine_log_command(out, state)
        if tail is None:
            return
        # already followed: the recipe's serve log (the same file), or its container's output
        followed = [cmd for (n, _source), cmd in tailed if n == node]
        key = out.file or engine_container(out, state)
        if key and any(key in cmd for cmd in followed):
            return
        self.tail(node, f"engine:{engine.pid}", f"{tail} 2>/dev/null")

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
            failed = self._nccl_failed.get(node)
        if (done is not None and done[0] == c.id) or failed == c.id:
            return
        command = shell.fill(commands.NCCL_LIBRARIES, {"container": c.name})
        try:
            res = self.transports[node].run(command, timeout=60.0)
        except Exception:  # unreachable now: read it on a later round
            return
        libs = parse_nccl_libraries(res.stdout)
        if isinstance(libs, Unparseable) or (not res.ok and not libs):
            with self._lock:  # no find/sha256sum in it, or it went away: try the next launch
                self._nccl_failed[node] = c.id
            return
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
        """The head's extra section: the engine's /metrics on the port its command line names
        (whoever started it), else the recipe's serve port."""
        with self._lock:
            head = self._states.get(self.cluster.head.name)
        if head is not None and head.engine is not None:
            return {
                commands.METRICS_SECTION: shell.fill(commands.METRICS, {"port": head.engine.port})
            }
        recipe = self._recipe() or {}
        port = recipe.get("recipe.serve_args.--port")
        if port is None:
            port = 30000 if recipe.get("recipe.engine") == "sglang" else 8000
        try:
            port = int(float(port))
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
    def _open_dmon(self, node: str) -> None:
        """Start the node's dmon stream (in the pool); the pump reads it, its end reopens it."""
        if self._stop.is_set():
            return
        key = ("dmon", node)
        try:
            stream = self.transports[node].stream(commands.DMON)
        except Exception:  # unreachable (or a transport bug): try again next period
            self._later(self.period_s, key, lambda: self._open_dmon(node))
            return
        with self._lock:
            self._streams[(node, "dmon")] = stream
        parser = DmonParser()
        got = [0]

        def on_lines(lines: list[str]) -> bool:
            for line in lines:
                sample = parser.feed(line)
                if sample is not None:
                    got[0] += 1
                    with self._lock:
                        self._dmon[node][sample.gpu] = (sample, self.clock.now())
            return not self._stop.is_set()

        def on_end() -> None:
            # no samples at all: no nvidia-smi (or no GPU) here; try again much later
            wait = self.period_s if got[0] else 30 * self.period_s
            self._later(wait, key, lambda: self._open_dmon(node))

        self._pump.add(stream, on_lines, on_end)
        if self._stop.is_set():  # stopped while it opened: the pump may be gone
            stream.close()

    def _open_tail(self, node: str, source: str) -> None:
        """Start following a tailed source (in the pool); its end reopens it: at once when
        its command was replaced, after a period when it read lines, else after a back-off
        (1, 2, 4 … periods, at most TAIL_BACKOFF_MAX: nothing is there to read yet)."""
        if self._stop.is_set():
            return
        key = ("tail", node, source)
        with self._lock:
            command = self._tailing[(node, source)]
        try:
            stream = self.transports[node].stream(command)
        except Exception:  # unreachable (or a transport bug): try again next period
            self._later(self.period_s, key, lambda: self._open_tail(node, source))
            return
        with self._lock:
            self._streams[(node, source)] = stream
            replaced = self._tailing[(node, source)] != command
            opened_in = self._opened_in.get((node, source))
            self._opened_in[(node, source)] = self.attempt
        if opened_in is not None and opened_in != self.attempt:
            # opened again after a launch began: what it reads now is the new launch's log (a
            # new container under the same name), whose lines never continue the old one's
            # (the old crash, then the new banner, is no restart)
            self._queue_line((node, source, NEW_FILE))

        read = [0]

        def on_lines(lines: list[str]) -> bool:
            read[0] += len(lines)
            return all(self._queue_line((node, source, line)) for line in lines)

        def on_end() -> None:
            k = (node, source)
            with self._lock:
                again = self._tailing[k] != command
                if again or read[0]:  # a new command, or it read lines: the usual pace
                    self._tail_misses.pop(k, None)
                    self._tail_reset_by.pop(k, None)  # its container may come back: at once
                    wait = 0.0 if again else self.period_s
                else:  # nothing read: its container (or file) is not there; wait longer
                    misses = self._tail_misses[k] = self._tail_misses.get(k, 0) + 1
                    wait = self.period_s * min(2 ** (misses - 1), TAIL_BACKOFF_MAX)
            self._later(wait, key, lambda: self._open_tail(node, source))

        self._pump.add(stream, on_lines, on_end)
        if replaced:  # tail() changed the command while this opened
            self._pump.close(stream)
        if self._stop.is_set():
            stream.close()

    def _queue_line(self, item: tuple[str, str, str]) -> bool:
        """Hand a received line to the matcher; when it is behind, wait for room (the
        remote side's writes wait in the channel meanwhile). False once stopping."""
        while not self._stop.is_set():
            try:
                self._lines.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

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
            if item is not None and item[2] is NEW_FILE:
                key = (item[0], item[1])
                if key in batch:  # the old file's lines first
                    self._ingest(*key, batch.pop(key))
                with self._lock:
                    self._match.new_file(f"{item[0]}:{item[1]}")
            elif item is not None:
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
        """Match lines against the log walls; emit one LogLines batch and the diagnoses.
        The lines are what a node says: cleaned and capped here, where they enter."""
        self.cluster.node(node)
        lines = [clean_line(line) for line in lines]
        key = f"{node}:{source}"
        raised: list[DiagnosisRaised] = []
        marks: list[tuple[int, str, str]] = []
        facts_by_node = self.facts_by_node()
        # what a signature's `only_when` is judged on: this node's facts with the recipe's
        # (the recipe's and the cluster's alone while the node has no reading yet)
        line_facts = facts_by_node.get(node) or self.facts()
        with self._lock:
            now = self.clock.now()
            first_no = self._match.line_count(key) + 1
            serving = source not in NON_SERVING_SOURCES
            for i, line in enumerate(lines):
                if serving:
                    self._serving[node].feed(line, now)
                for hit in self._match.feed_line(key, line):
                    if hit.ruled_out(line_facts):  # harmless here (NCCL on lo, one node)
                        continue
                    marks.append((i, hit.wall.id, hit.severity))
                    if serving and hit.severity == "error":
                        self._serving[node].mark_crashed()
                    diag, new = self._book.add_hit(
                        hit,
                        source=Source.log(node, source),
                        node=node,
                        now=now,
                        facts_by_node=facts_by_node,
                    )
                    if new:
                        diag.attempt = self.attempt
                    if self._announce(diag, new, now):
                        raised.append(DiagnosisRaised(diag.snapshot(), new, now))
            if serving and self._serving[node].engine_seen:
                self._own_log[node] = True  # this node's engine rank logs here itself
            for n, text, ref in self._expected:
                waiter = ref() if n == node else None
                if waiter is not None and any(text in line for line in lines):
                    waiter.set()
            if serving:  # the panes show progress without waiting for a round
                for name in [node, *self._mirrors(node)]:
                    if name in self._states and self._states[name].reachable:
                        st = self._states[name]
                        self._states[name] = dataclasses.replace(
                            st, serving=self._serving_of(name, st)
                        )
        shown = tuple(redact(line) for line in lines)  # shown: secrets as ${NAME}
        self.emit(LogLines(node, source, shown, first_no, tuple(marks)))
        for event in raised:
            self.emit(event)

    def _mirrors(self, node: str) -> list[str]:
        """The nodes whose serving phase follows this one's log (the head's workers)."""
        if node != self.cluster.head.name:
            return []
        return [n.name for n in self.cluster.workers if not self._own_log.get(n.name)]

    def _announce(self, diag: Diagnosis, new: bool, now: float) -> bool:
        """A repeat hit is announced at most every REPEAT_EMIT_S, except when it changed what
        the front ends show (a suspected wall the log now says in its own words): events
        carry frozen snapshots, so an unannounced change would never reach a screen."""
        key = (diag.wall.id, diag.source)
        last_at, severity, confidence = self._last_emit.get(key, (float("-inf"), "", ""))
        changed = (diag.severity, diag.confidence) != (severity, confidence)
        if new or changed or now - last_at >= REPEAT_EMIT_S:
            self._last_emit[key] = (now, diag.severity, diag.confidence)
            return True
        return False


def log_source_command(kind: str, value: str) -> str:
    """The tail of a cluster.yaml log source (a command is taken as written)."""
    if kind == "file":
        return shell.fill(commands.FILE_TAIL, {"path": value})
    if kind == "unit":
        return shell.fill(commands.UNIT_TAIL, {"unit": value})
    if kind == "container":
        return shell.fill(commands.SERVE_LOG_TAIL, {"container": value})
    return value


def engine_container(out: EngineOutput, state: NodeState) -> str | None:
    """The name of the container an engine runs in: one `docker ps` lists (else None)."""
    if not out.container_id:
        return None
    cid = out.container_id
    return next((c.name for c in state.containers if c.id and cid.startswith(c.id)), None)


def engine_log_command(out: EngineOutput, state: NodeState) -> str | None:
    """How to follow a running engine's output: the file (inside its container when it has
    one), its container's output, its unit's journal; None for a terminal or unknown.
    A file on the host is read through the process's open descriptor, never by its name."""
    container = engine_container(out, state)
    if out.file and container:
        return shell.fill(commands.CONTAINER_FILE_TAIL, {"container": container, "path": out.file})
    target = out.target or ""
    on_host = target.startswith("/") and not container
    if on_host and state.engine is not None and not target.startswith(("/dev/", "/proc/")):
        return shell.fill(commands.ENGINE_FD_TAIL, {"pid": state.engine.pid})  # deleted, too
    if container:
        return shell.fill(commands.SERVE_LOG_TAIL, {"container": container})
    if out.unit:
        return shell.fill(commands.UNIT_TAIL, {"unit": out.unit})
    return None


def _words(command: str) -> list[str]:
    """A command line's words as the shell reads them (split on blanks if it cannot)."""
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _is_serving_name(name: str, image: str) -> bool:
    text = f"{name} {image}".lower()
    return any(w in text for w in ("vllm", "sglang"))
