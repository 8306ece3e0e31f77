"""A fixed number of threads for any number of nodes (the monitor's, spark_tui.monitor).

    pool = WorkerPool(size=8)       # timed jobs: a node's round, opening a stream
    pool.at(0.0, ("round", "spark1"), job)
    pump = StreamPump()             # ONE thread reads every open stream (dmon, log tails)
    pump.add(stream, on_lines, on_end)

A job runs once in one of the pool's threads, `delay` real seconds after it was planned;
it plans its next run itself (`at` again), so a job is never run twice at once and a slow
node holds one thread, not a queue. The pump waits on the streams' descriptors
(epoll) and looks at the ones without a descriptor every STREAM_POLL_S; a stream that
ends (or is closed through the pump) is unregistered before it is closed, then `on_end`
runs (it plans the reopen). Both stop within a second of `stop()`."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import selectors
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from spark_tui.nodes.transport import STREAM_POLL_S, LineStream

LIVENESS_S = 0.5  # real seconds between looks at quiet streams with a descriptor (did it die?)


class WorkerPool:
    """`size` threads running timed jobs, one job per key at a time."""

    def __init__(self, size: int, name: str = "worker") -> None:
        self.size = max(1, size)
        self.name = name
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, Hashable]] = []
        self._jobs: dict[Hashable, tuple[float, int, Callable[[], None]]] = {}
        self._running: set[Hashable] = set()
        self._hurried: set[Hashable] = set()
        self._seq = itertools.count()
        self._stop = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for i in range(self.size):
            th = threading.Thread(target=self._loop, name=f"{self.name}-{i}", daemon=True)
            self._threads.append(th)
            th.start()

    def at(self, delay: float, key: Hashable, job: Callable[[], None]) -> None:
        """Run `job` in `delay` real seconds (at once when `key` was hurried meanwhile).
        A key planned already keeps the earlier of the two times."""
        now = time.monotonic()
        with self._cv:
            if key in self._hurried:
                self._hurried.discard(key)
                delay = 0.0
            due = now + max(0.0, delay)
            old = self._jobs.get(key)
            if old is not None and old[0] <= due:
                return
            seq = next(self._seq)
            self._jobs[key] = (due, seq, job)
            heapq.heappush(self._heap, (due, seq, key))
            self._cv.notify()

    def hurry(self, keys: Iterable[Hashable]) -> None:
        """These keys' next runs now: planned ones are moved up, running ones run again
        as soon as they plan their next run."""
        now = time.monotonic()
        with self._cv:
            for key in keys:
                old = self._jobs.get(key)
                if old is not None:
                    seq = next(self._seq)
                    self._jobs[key] = (now, seq, old[2])
                    heapq.heappush(self._heap, (now, seq, key))
                elif key in self._running:
                    self._hurried.add(key)
            self._cv.notify_all()

    def stop(self, timeout: float = 10.0, *, join: bool = True) -> None:
        """No job starts from now on; the running ones are waited for (unless join=False)."""
        with self._cv:
            self._stop = True
            self._jobs.clear()
            self._heap.clear()
            self._cv.notify_all()
        if not join:
            return
        for th in self._threads:
            if th is not threading.current_thread():
                th.join(timeout=timeout)

    @property
    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def _next(self) -> tuple[Hashable, Callable[[], None]] | None:
        with self._cv:
            while not self._stop:
                while self._heap:
                    due, seq, key = self._heap[0]
                    job = self._jobs.get(key)
                    if job is None or job[1] != seq:
                        heapq.heappop(self._heap)  # moved up or dropped since
                        continue
                    break
                if not self._heap:
                    self._cv.wait()
                    continue
                due, seq, key = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._heap)
                _, _, job_fn = self._jobs.pop(key)
                self._running.add(key)
                return key, job_fn
        return None

    def _loop(self) -> None:
        while True:
            got = self._next()
            if got is None:
                return
            key, job = got
            try:
                job()
            except Exception:  # a job reports its own failures; the pool goes on
                pass
            finally:
                with self._cv:
                    self._running.discard(key)


@dataclass(eq=False)
class _Followed:
    stream: LineStream
    on_lines: Callable[[list[str]], bool]  # False: stop reading (the monitor is stopping)
    on_end: Callable[[], None]
    fd: int | None = None
    closing: bool = field(default=False)


class StreamPump:
    """ONE thread that reads every stream added to it, without blocking on any."""

    def __init__(self, name: str = "streams", poll_s: float = STREAM_POLL_S) -> None:
        self.name = name
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._new: list[_Followed] = []
        self._closing: list[LineStream] = []
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def add(
        self,
        stream: LineStream,
        on_lines: Callable[[list[str]], bool],
        on_end: Callable[[], None],
    ) -> None:
        with self._lock:
            self._new.append(_Followed(stream, on_lines, on_end))
        self._wake()

    def close(self, stream: LineStream) -> None:
        """Stop following `stream` and close it (in the pump's thread, after unregistering
        its descriptor); its on_end runs."""
        with self._lock:
            self._closing.append(stream)
        self._wake()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and close every stream still followed (no on_end)."""
        self._stop.set()
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake is pending anyway) or closed
            os.write(self._wake_w, b"x")

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        followed: list[_Followed] = []
        last_sweep = time.monotonic()
        try:
            while not self._stop.is_set():
                with self._lock:
                    new, self._new = self._new, []
                    closing, self._closing = self._closing, []
                for f in new:
                    followed.append(f)
                    self._register(sel, f)
                for stream in closing:
                    for f in [f for f in followed if f.stream is stream]:
                        f.closing = True
                polled = any(f.fd is None for f in followed)
                events = sel.select(timeout=self.poll_s if polled else LIVENESS_S)
                ready: list[_Followed] = []
                for key, _mask in events:
                    if key.data is None:
                        with contextlib.suppress(OSError):
                            while os.read(self._wake_r, 4096):
                                pass
                    else:
                        ready.append(key.data)
                now = time.monotonic()
                sweep = now - last_sweep >= LIVENESS_S
                if sweep:
                    last_sweep = now
                seen = set(map(id, ready))
                for f in followed:
                    if id(f) not in seen and (f.closing or f.fd is None or sweep):
                        ready.append(f)
                for f in ready:
                    if self._stop.is_set():
                        break
                    if not self._service(sel, f):
                        followed.remove(f)
        finally:
            for f in followed:
                self._unregister(sel, f)
                with contextlib.suppress(Exception):
                    f.stream.close()
            sel.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _service(self, sel: selectors.BaseSelector, f: _Followed) -> bool:
        """Read what the stream has; False once it ended (unregistered, closed, on_end run)."""
        lines: list[str] | None
        if f.closing:
            lines = None
        else:
            try:
                lines = f.stream.read_lines()
            except Exception:  # a transport bug ends the stream; the monitor reopens it
                lines = None
            if lines and not f.on_lines(lines):
                lines = None
        if lines is not None:
            return True
        self._unregister(sel, f)
        with contextlib.suppress(Exception):
            f.stream.close()
        if not self._stop.is_set():
            with contextlib.suppress(Exception):
                f.on_end()
        return False

    def _register(self, sel: selectors.BaseSelector, f: _Followed) -> None:
        try:
            fd = f.stream.fileno()
        except Exception:
            fd = None
        if fd is None:
            return
        try:
            sel.register(fd, selectors.EVENT_READ, f)
            f.fd = fd
        except (KeyError, ValueError, OSError):  # not a selectable descriptor: polled
            f.fd = None

    def _unregister(self, sel: selectors.BaseSelector, f: _Followed) -> None:
        if f.fd is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                sel.unregister(f.fd)
            f.fd = None
