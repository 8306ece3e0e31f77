"""Run a LaunchPlan step by step through the nodes' Transports.

`LaunchRunner.run_step` runs one step (a command, a wait for Ray's GPUs, a wait
for the startup line, the smoke request) and reports progress as
ActionProgress through `emit`; `run_steps` waits for consecutive wait-line steps of one
group (every node's own ready evidence) together: one loop polls each node, and the first
node whose container stopped or whose log shows a fatal line ends the wait at once, named; with a journal, every command has its `started`
record before it runs and its `finished` record after. A relaunch is the
`relaunch` action of spark_tui.remedy.actions (previewed, confirmed, journaled).
After a crash nothing restarts blindly: `AutoRelaunchGuard` allows one automatic
relaunch per diagnosis (spark_tui.driver decides whether this is one).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from spark_tui import redact, shell
from spark_tui.clock import Clock, RealClock
from spark_tui.errors import SparkTuiError
from spark_tui.events import ActionProgress
from spark_tui.kb.matcher import Matcher
from spark_tui.nodes.transport import CommandResult, NodeUnreachable, Transport
from spark_tui.recipes.plan import LaunchStep, ray_gpus, tar_dir
from spark_tui.remedy.journal import TIMED_OUT, Journal
from spark_tui.safefile import read_state_text, write_atomic

Emit = Callable[[ActionProgress], None]

# Lines in the serve log that mean the engine died although no wall names them (the
# walls of the knowledge base are recognised by the matcher): never wait out the full
# startup timeout for a corpse.
FATAL_MARKERS = (
    "Engine core initialization failed",
    "EngineDeadError",
    "Traceback (most recent call last)",
)
# Progress worth showing while waiting for the startup line.
_PROGRESS = re.compile(
    r"(Loading safetensors checkpoint shards:\s*\d+%[^|]*\|[^|]*\|\s*\d+/\d+"
    r"|Capturing CUDA graphs?[^\r\n]*?\d+/\d+"
    r"|Capture cuda graph[^\r\n]*"
    r"|Load weight end[^\r\n]*"
    r"|Model loading took[^\r\n]*"
    r"|Starting vLLM API server[^\r\n]*"
    r"|Uvicorn running on[^\r\n]*)"
)
_GONE = ("No such container", "is not running")
# how a wait fails when its node says nothing of why (its container stopped, no answer)
_BARE = ("the container stopped", "unreachable")
# between two polls of a wait, a look this often (clock seconds) at what needs no node: the
# monitor saw the line waited for, an error wall ended the launch, spark-tui is closing
LOOK_S = 0.5


def _noop(_: ActionProgress) -> None:
    pass


def fatal_wall(text: str, matcher: Matcher) -> str | None:
    """The first error-severity wall in a log excerpt, as 'wall-id: evidence', or None. A
    signature with `only_when` is left to the monitor, which knows the facts it needs."""
    for hit in matcher.scan_lines("serve-log", text.splitlines()):
        if hit.signature is not None and hit.signature.only_when:
            continue
        if hit.severity == "error":  # a suspected wall is not yet fatal
            return f"{hit.wall.id}: {hit.evidence[:300]}"
    return None


@dataclass
class StepResult:
    """How one step ended."""

    step: LaunchStep
    ok: bool
    detail: str = ""
    exit_code: int | None = None
    output_tail: str = ""
    tok_s: float | None = None
    polls: int = 0
    cause: bool = True  # False: a wait of a group ended because another node's wait failed


@dataclass
class LaunchResult:
    """How a plan (or part of it) ended: ok, or the step that failed."""

    ok: bool
    steps: list[StepResult] = field(default_factory=list)
    failed: StepResult | None = None
    tok_s: float | None = None

    def describe(self) -> str:
        if self.ok:
            return "launch complete" + (f": {self.tok_s:.1f} tok/s" if self.tok_s else "")
        f = self.failed
        assert f is not None
        return f"{f.step.title} failed on {f.step.node}: {f.detail}"


def parse_smoke(output: str) -> tuple[int | None, float | None, str]:
    """(completion tokens, seconds, reason) from curl's body + `time_total` line."""
    lines = output.rstrip("\n").splitlines()
    if not lines:
        return None, None, "no answer"
    try:
        seconds = float(lines[-1].strip())
    except ValueError:
        return None, None, "no timing line from curl"
    body = "\n".join(lines[:-1])
    try:
        data = json.loads(body)
    except ValueError:
        return None, seconds, f"not JSON: {body[:200]}"
    if not isinstance(data, dict) or not data.get("choices"):
        return None, seconds, f"no completion: {body[:200]}"
    usage = data.get("usage") or {}
    tokens = usage.get("completion_tokens")
    return (int(tokens) if isinstance(tokens, (int, float)) else None), seconds, ""


class LaunchRunner:
    """Runs launch steps on their nodes; the same engine for the TUI and headless callers."""

    def __init__(
        self,
        transports: Mapping[str, Transport],
        clock: Clock | None = None,
        emit: Emit | None = None,
        journal: Journal | None = None,
        run_id: str = "",
        context: str = "launch",
        matcher: Matcher | None = None,
        abort: Callable[[], str | None] | None = None,
        stop: threading.Event | None = None,
        seen: Callable[[str, str], threading.Event | None] | None = None,
    ) -> None:
        self.transports = transports
        self.abort = abort  # an error wall the live monitor saw: a wait ends early
        # the live monitor's word that a line holding a wait's text arrived from its node:
        # the wait polls at once (the poll still decides)
        self.seen = seen
        self.stop = stop  # set when spark-tui is closing: a wait ends at its next poll
        # the session's matcher: its walls end a wait early (None: only FATAL_MARKERS do)
        self.matcher = matcher
        self.clock = clock or RealClock()
        self.emit = emit or _noop
        self.journal = journal
        self.run_id = run_id
        self.context = context

    def _transport(self, node: str) -> Transport:
        try:
            return self.transports[node]
        except KeyError:
            raise SparkTuiError(f"no connection to node {node!r}") from None

    def _run(
        self,
        step: LaunchStep,
        command: str,
        timeout: float,
        log: bool,
        input: bytes | None = None,
    ) -> CommandResult:
        """Run one command; with `log`, between its journal records (written before it runs).
        The journal keeps the command as previewed (secrets as ${NAME}); the node gets their
        values, filled in now (redact.expand)."""
        transport = self._transport(step.node)
        runs = redact.expand(command)
        if not log or self.journal is None:
            return transport.run(runs, timeout=timeout, input=input)
        with self.journal.command(self.run_id, self.context, step.node, step.id, command) as rec:
            result = transport.run(runs, timeout=timeout, input=input)
            rec.finish(
                None if result.timed_out else result.exit_code,
                result.tail(),
                outcome=TIMED_OUT if result.timed_out else "exit",
            )
        return result

    def run_step(self, step: LaunchStep) -> StepResult:
        """Run one step to its end (waits poll through the clock until their timeout)."""
        self.emit(ActionProgress(step.id, step.node, step.command, "running", step.title))
        try:
            if step.kind in ("run", "copy"):
                data = None
                if step.kind == "copy":
                    try:
                        data = tar_dir(step.source)
                    except OSError as exc:
                        out = StepResult(step, False, f"cannot read {step.source}: {exc}")
                        self.emit(
                            ActionProgress(step.id, step.node, step.command, "failed", out.detail)
                        )
                        return out
                res = self._run(step, step.command, step.timeout_s, log=True, input=data)
                out = StepResult(step, res.ok, "", res.exit_code, res.tail())
                if not res.ok:
                    out.detail = failure_text(res)
                    out.ok = step.may_fail
            elif step.kind == "wait-ray":
                out = self._wait(step, self._ray_check)
            elif step.kind == "wait-line":
                out = self._wait(step, self._line_check)
            elif step.kind == "smoke":
                out = self._smoke(step)
            else:
                out = StepResult(step, False, f"unknown step kind {step.kind!r}")
        except NodeUnreachable as exc:
            out = StepResult(step, False, f"unreachable: {exc.reason}")
        except redact.UnresolvedReference as exc:
            out = StepResult(step, False, str(exc))
        status = "ok" if out.ok else "failed"
        self.emit(ActionProgress(step.id, step.node, step.command, status, out.detail))
        return out

    def _ray_check(self, step: LaunchStep, res: CommandResult) -> tuple[bool | None, str]:
        gpus = ray_gpus(res.stdout) if res.ok else None
        if gpus is None:
            return False, "Ray not answering yet"
        if gpus >= step.gpus:
            return True, f"Ray shows {gpus:g} GPUs"
        return False, f"Ray shows {gpus:g}/{step.gpus} GPUs"

    def _line_check(self, step: LaunchStep, res: CommandResult) -> tuple[bool | None, str]:
        text = res.stdout + res.stderr
        if step.expect in text:
            return True, step.expect
        if not res.ok and any(g in text for g in _GONE):
            return None, f"the container stopped: {res.tail(3)}"
        wall = fatal_wall(res.stdout, self.matcher) if self.matcher is not None else None
        if wall is not None:
            return None, f"the serve log shows {wall}"
        for marker in FATAL_MARKERS:
            if marker in res.stdout:
                line = next((ln for ln in reversed(res.stdout.splitlines()) if ln.strip()), marker)
                return None, f"the serve log shows a fatal error: {line.strip()[:300]}"
        progress = _PROGRESS.findall(res.stdout)
        return False, progress[-1].strip() if progress else "waiting for the startup line"

    def _wait(self, step: LaunchStep, check) -> StepResult:
        """Poll until the check says done (a group of one)."""
        return self._wait_group([step], {step.id: check})[0]

    def run_group(self, steps: Sequence[LaunchStep]) -> list[StepResult]:
        """Wait-line steps of one group, waited for together (run_steps calls it)."""
        for step in steps:
            self.emit(ActionProgress(step.id, step.node, step.command, "running", step.title))
        outs = self._wait_group(list(steps), {s.id: self._line_check for s in steps})
        for out in outs:
            status = "ok" if out.ok else "failed"
            self.emit(
                ActionProgress(out.step.id, out.step.node, out.step.command, status, out.detail)
            )
        return outs

    def _wait_group(
        self, steps: list[LaunchStep], checks: Mapping[str, Callable]
    ) -> list[StepResult]:
        """Poll until every check says done; one pair of journal records per wait for the
        whole wait (its polls are read-only)."""
        if self.journal is None:
            return self._poll_group(steps, checks)
        with ExitStack() as stack:
            recs = [
                stack.enter_context(
                    self.journal.command(self.run_id, self.context, s.node, s.id, s.command)
                )
                for s in steps
            ]
            outs = self._poll_group(steps, checks)
            for rec, out in zip(recs, outs, strict=True):
                rec.finish(0 if out.ok else 1, out.detail, polls=out.polls)
        return outs

    def _poll_once(
        self, step: LaunchStep, check: Callable
    ) -> tuple[bool | None, str, CommandResult | None]:
        """One poll of one wait: (done, detail, result); None: it failed for good."""
        try:
            res = self._run(step, step.command, min(60.0, step.timeout_s), log=False)
        except NodeUnreachable as exc:
            return None, f"unreachable: {exc.reason}", None
        done, detail = check(step, res)
        return done, detail, res

    def _poll_group(
        self, steps: list[LaunchStep], checks: Mapping[str, Callable]
    ) -> list[StepResult]:
        """Every wait of the group polled in turn until all are done. A wait already done is
        polled again while the others go on: its node may still die (a stopped container, a
        fatal line in its log). The first that fails for good — or runs out of time — ends
        every wait at once (the others: 'stopped waiting: NODE …')."""
        start = self.clock.now()
        deadline = {s.id + "@" + s.node: start + s.timeout_s for s in steps}
        key = [s.id + "@" + s.node for s in steps]
        done = [False] * len(steps)
        polls = [0] * len(steps)
        detail = [""] * len(steps)
        shown = [""] * len(steps)
        last: list[CommandResult | None] = [None] * len(steps)
        seens = [self.seen(s.node, s.expect) if self.seen and s.expect else None for s in steps]
        interval = min(s.interval_s for s in steps)

        def result(i: int, ok: bool, why: str, cause: bool = True) -> StepResult:
            res = last[i]
            return StepResult(
                steps[i],
                ok,
                why,
                res.exit_code if res is not None else None,
                res.tail() if res is not None else "",
                polls=polls[i],
                cause=cause,
            )

        def ended_by(i: int, why: str) -> list[StepResult]:
            """Wait i failed for good: it ends every other one."""
            node = steps[i].node
            return [
                result(i, False, why)
                if j == i
                else result(
                    j,
                    done[j],
                    detail[j] if done[j] else f"stopped waiting: {node} failed ({steps[i].title})",
                    cause=False,
                )
                for j in range(len(steps))
            ]

        while True:
            for ev in seens:
                if ev is not None:
                    ev.clear()  # a line from now on wakes the next pause
            failed: list[tuple[int, str]] = []
            for i, step in enumerate(steps):
                ok, why, res = self._poll_once(step, checks[step.id])
                polls[i] += 1
                if res is not None:
                    last[i] = res
                if ok is None:
                    failed.append((i, why))
                elif ok and not done[i]:
                    done[i], detail[i] = True, why
                elif not done[i]:
                    detail[i] = why
            if failed:
                # several nodes down in one round (one engine across the nodes dies as one):
                # the node whose own log says why, else the first in the plan's order
                i, why = min(failed, key=lambda f: (f[1].startswith(_BARE), f[0]))
                return ended_by(i, why)
            if all(done):
                return [result(i, True, detail[i]) for i in range(len(steps))]
            if self.abort is not None:
                blocker = self.abort()
                if blocker:
                    i = self._blamed(steps, done, blocker)
                    return ended_by(i, f"stopped waiting: {blocker}")
            now = self.clock.now()
            for i in range(len(steps)):
                if not done[i] and now >= deadline[key[i]]:
                    why = f"timed out after {steps[i].timeout_s:g} s ({detail[i]})"
                    return ended_by(i, why)
            for i, step in enumerate(steps):
                if not done[i] and detail[i] != shown[i]:
                    self.emit(ActionProgress(step.id, step.node, None, "running", detail[i]))
                    shown[i] = detail[i]
            left = min(deadline[key[i]] - now for i in range(len(steps)) if not done[i])
            self._pause(min(interval, max(left, 0.0)), [e for e in seens if e is not None])
            if self.stop is not None and self.stop.is_set():
                why = "stopped waiting: spark-tui is closing (the launch goes on on the nodes)"
                i = next(i for i in range(len(steps)) if not done[i])
                return [
                    result(j, done[j], detail[j] if done[j] else why, cause=j == i)
                    for j in range(len(steps))
                ]

    @staticmethod
    def _blamed(steps: list[LaunchStep], done: list[bool], blocker: str) -> int:
        """The wait an error wall ends: the one of the node the wall names, else the first
        still waiting."""
        for i, step in enumerate(steps):
            if f" on {step.node}:" in blocker:
                return i
        return next((i for i in range(len(steps)) if not done[i]), len(steps) - 1)

    def _pause(self, seconds: float, seen: Sequence[threading.Event]) -> None:
        """The wait between two polls; it ends early when the monitor saw a line waited
        for, an error wall stops the launch, or spark-tui is closing."""
        if not seen and self.abort is None and self.stop is None:
            self.clock.sleep(seconds)
            return
        end = self.clock.now() + seconds
        while True:
            left = end - self.clock.now()
            if left <= 0:
                return
            self.clock.sleep(min(LOOK_S, left))
            if any(e.is_set() for e in seen) or (self.stop is not None and self.stop.is_set()):
                return
            if self.abort is not None and self.abort():
                return

    def _smoke(self, step: LaunchStep) -> StepResult:
        """One chat request; its journal record carries the tok/s (what `status` shows)."""
        if self.journal is None:
            return self._smoke_result(
                step,
                self._transport(step.node).run(redact.expand(step.command), timeout=step.timeout_s),
            )
        with self.journal.command(
            self.run_id, self.context, step.node, step.id, step.command
        ) as rec:
            res = self._transport(step.node).run(
                redact.expand(step.command), timeout=step.timeout_s
            )
            out = self._smoke_result(step, res)
            rec.finish(
                None if res.timed_out else res.exit_code,
                res.tail(),
                outcome=TIMED_OUT if res.timed_out else "exit",
                tok_s=out.tok_s,
            )
        return out

    @staticmethod
    def _smoke_result(step: LaunchStep, res: CommandResult) -> StepResult:
        if not res.ok:
            return StepResult(step, False, failure_text(res), res.exit_code, res.tail())
        tokens, seconds, why = parse_smoke(res.stdout)
        if why:
            return StepResult(step, False, why, res.exit_code, res.tail())
        tok_s = tokens / seconds if tokens and seconds else None
        detail = (
            f"{tokens} tokens in {seconds:.2f} s: {tok_s:.1f} tok/s"
            if tok_s is not None
            else "answered (no token count)"
        )
        return StepResult(step, True, detail, res.exit_code, res.tail(), tok_s=tok_s)

    def run_steps(self, steps: list[LaunchStep] | tuple[LaunchStep, ...]) -> LaunchResult:
        """Steps in order (a group's waits together); stops at the first failure."""
        result = LaunchResult(ok=True)
        steps = list(steps)
        i = 0
        while i < len(steps):
            step = steps[i]
            j = i + 1
            if step.group and step.kind == "wait-line":
                while (
                    j < len(steps) and steps[j].group == step.group and steps[j].kind == step.kind
                ):
                    j += 1
                outs = self.run_group(steps[i:j])
            else:
                outs = [self.run_step(step)]
            i = j
            for r in outs:
                result.steps.append(r)
                if r.tok_s is not None:
                    result.tok_s = r.tok_s
            failed = [r for r in outs if not r.ok]
            if failed:
                result.ok = False
                result.failed = next((r for r in failed if r.cause), failed[0])
                break
        return result


def failure_text(res: CommandResult) -> str:
    """Why a command failed, in one line (with the sudoers rule when sudo wanted a password)."""
    if res.timed_out:
        return "timed out"
    tail = res.tail(5)
    if shell.needs_sudo_password(tail):
        from spark_tui.remedy.sudoers import sudoers_hint

        return f"sudo needs a password (exit {res.exit_code}). {sudoers_hint()}"
    return f"exit {res.exit_code}: {tail}" if tail else f"exit {res.exit_code}"


class AutoRelaunchGuard:
    """At most one automatic relaunch per diagnosis, and never a second one for the same wall
    (state kept across restarts): after that, the user is asked."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, float]:
        try:
            data = json.loads(read_state_text(self.path))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def allowed(self, diagnosis_key: str) -> bool:
        """Whether an automatic relaunch may still happen for this diagnosis."""
        return diagnosis_key not in self._load()

    def record(self, diagnosis_key: str, when: float) -> None:
        data = self._load()
        data[diagnosis_key] = when
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(data))

    def claim(self, diagnosis_key: str, when: float, wall: str | None = None) -> bool:
        """Allowed and recorded in one go; False means: ask the user instead. With `wall`,
        a wall that already had its automatic relaunch (under any diagnosis) is refused."""
        if not self.allowed(diagnosis_key):
            return False
        if wall is not None and not self.allowed(WALL_KEY + wall):
            return False
        self.record(diagnosis_key, when)
        if wall is not None:
            self.record(WALL_KEY + wall, when)
        return True


WALL_KEY = "wall:"
