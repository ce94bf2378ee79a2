"""Host pipeline: host threads prepare batch i+1 (tokenize, pad, stage) while the
accelerator works on batch i.

    pipe = HostPipeline(prepare, compute, prep_threads=1, queue_depth=2)
    results, stats = pipe.run(raw_batches)
    stats.busy_fraction   # share of the wall time the accelerator was computing

* ``prepare(raw) -> staged`` runs on ``prep_threads`` host threads; ``compute(staged) ->
  result`` runs on one accelerator thread, batch after batch. The compute calls of
  fpgallm._core release the GIL, so preparation (Python or C++) really overlaps them.
* The staged batches wait in a bounded queue of ``queue_depth``: when the accelerator falls
  behind, preparation blocks (back-pressure) instead of filling memory. No batch more than
  ``queue_depth + prep_threads`` past the one the accelerator waits for is taken from the
  input, so one stalled host thread does not let the others run ahead either.
* The accelerator computes the batches in input order (a batch prepared early by another
  host thread waits its turn), each exactly once; results come back in input order.
* An exception in ``prepare`` (or in the input iterable) at batch i: the batches before i
  are still computed, nothing from i on; in ``compute`` at batch i: everything stops at
  once. Either way ``run`` raises ``PipelineError`` naming the batch and the stage,
  chained to the original exception, and ``error.completed`` holds the results of exactly
  the batches 0 .. i-1. Ctrl-C (KeyboardInterrupt in the calling thread) stops every
  thread (after the batch in flight) and is re-raised. No thread is left running after
  ``run`` returns or raises.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, List, Optional

_POLL_S = 0.05  # how often blocked threads look at the stop flag


class PipelineError(RuntimeError):
    def __init__(self, batch: int, stage: str, cause: BaseException, completed: dict):
        super().__init__(f"batch {batch} failed in {stage}: {type(cause).__name__}: {cause}")
        self.batch, self.stage, self.completed = batch, stage, completed


@dataclass
class PipelineStats:
    batches: int = 0            # batches computed
    wall_s: float = 0.0         # run() start to the last batch computed
    busy_s: float = 0.0         # time inside compute()
    prep_s: float = 0.0         # time inside prepare(), summed over the host threads
    starved_s: float = 0.0      # accelerator idle, waiting for a staged batch
    blocked_s: float = 0.0      # host threads blocked on a full queue (back-pressure)
    compute_times: List[float] = field(default_factory=list)

    @property
    def busy_fraction(self) -> float:
        return self.busy_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict:
        return {"batches": self.batches, "wall_s": self.wall_s, "busy_s": self.busy_s,
                "busy_fraction": self.busy_fraction, "prep_s": self.prep_s,
                "starved_s": self.starved_s, "blocked_s": self.blocked_s}


_END = object()  # one per host thread, after its last batch


class HostPipeline:
    def __init__(self, prepare: Callable[[Any], Any], compute: Callable[[Any], Any], *,
                 prep_threads: int = 1, queue_depth: int = 2):
        if prep_threads < 1 or queue_depth < 1:
            raise ValueError("prep_threads and queue_depth must be at least 1")
        self.prepare, self.compute = prepare, compute
        self.prep_threads, self.queue_depth = prep_threads, queue_depth

    def run(self, raw_batches: Iterable[Any]) -> tuple:
        source = enumerate(raw_batches)
        staged: "queue.Queue" = queue.Queue(maxsize=self.queue_depth)
        stop = threading.Event()   # hard stop: a compute failure, Ctrl-C, or the end
        done = threading.Event()   # the accelerator thread has finished
        lock = threading.Lock()
        results: dict = {}
        failure: list = []         # [(batch, stage, exception)]: the lowest batch wins
        limit = [float("inf")]     # batches from this index on are not computed
        stats = PipelineStats()

        def fail(batch: int, stage: str, exc: BaseException, hard: bool) -> None:
            with lock:
                if not failure or batch < failure[0][0]:
                    failure[:] = [(batch, stage, exc)]
                limit[0] = min(limit[0], batch)
            if hard:
                stop.set()

        def put(item) -> bool:  # blocks while the queue is full; False when stopped
            t0 = time.perf_counter()
            while not stop.is_set():
                try:
                    staged.put(item, timeout=_POLL_S)
                    with lock:
                        stats.blocked_s += time.perf_counter() - t0
                    return True
                except queue.Full:
                    continue
            return False

        def host_worker() -> None:
            try:
                while not stop.is_set():
                    input_error = None
                    with window_open:
                        # at most `window` batches past the one the accelerator waits for are
                        # taken, so a host thread that stalls on its batch cannot let the others
                        # prepare (and the accelerator hold) the whole input
                        while (not stop.is_set() and fetched[0] < limit[0]
                               and fetched[0] >= expected_now[0] + window):
                            window_open.wait(_POLL_S)
                        if stop.is_set():
                            break
                        try:
                            index, raw = next(source)
                        except StopIteration:
                            break
                        except BaseException as exc:  # the input iterable itself failed
                            index, input_error = fetched[0], exc
                        fetched[0] = index + 1
                    if input_error is not None:
                        fail(index, "input", input_error, hard=False)
                        break
                    if index >= limit[0]:
                        break
                    t0 = time.perf_counter()
                    try:
                        item = self.prepare(raw)
                    except BaseException as exc:
                        fail(index, "prepare", exc, hard=False)
                        break
                    with lock:
                        stats.prep_s += time.perf_counter() - t0
                    if not put((index, item)):
                        return
                put(_END)
            except BaseException as exc:  # a bug here must not leave the accelerator waiting
                fail(-1, "host thread", exc, hard=True)

        fetched = [0]       # batches taken from the input so far
        expected_now = [0]  # the batch the accelerator computes next
        window = self.queue_depth + self.prep_threads
        window_open = threading.Condition(lock)

        def accelerator() -> None:
            ended, expected = 0, 0
            pending: dict = {}  # staged batches that arrived ahead of their turn
            try:
                while not stop.is_set() and expected < limit[0]:
                    if expected in pending:
                        item = pending.pop(expected)
                        t0 = time.perf_counter()
                        try:
                            result = self.compute(item)
                        except BaseException as exc:
                            fail(expected, "compute", exc, hard=True)
                            return
                        elapsed = time.perf_counter() - t0
                        stats.busy_s += elapsed
                        stats.compute_times.append(elapsed)
                        results[expected] = result
                        stats.batches += 1
                        stats.wall_s = time.perf_counter() - start
                        expected += 1
                        with window_open:
                            expected_now[0] = expected
                            window_open.notify_all()
                        continue
                    if ended == self.prep_threads:
                        break
                    t0 = time.perf_counter()
                    try:
                        entry = staged.get(timeout=_POLL_S)
                    except queue.Empty:
                        stats.starved_s += time.perf_counter() - t0
                        continue
                    stats.starved_s += time.perf_counter() - t0
                    if entry is _END:
                        ended += 1
                    else:
                        pending[entry[0]] = entry[1]
            finally:
                done.set()

        start = time.perf_counter()
        threads = [threading.Thread(target=host_worker, name=f"fpgallm-host-{i}", daemon=True)
                   for i in range(self.prep_threads)]
        threads.append(threading.Thread(target=accelerator, name="fpgallm-accelerator", daemon=True))
        for t in threads:
            t.start()
        try:
            while not done.wait(_POLL_S):
                pass
        finally:  # also on KeyboardInterrupt (Ctrl-C) in the calling thread
            stop.set()
            for t in threads:
                t.join()
        if failure:
            batch, stage, exc = failure[0]
            raise PipelineError(batch, stage, exc, dict(results)) from exc
        return [results[i] for i in range(len(results))], stats


def run_serial(prepare: Callable[[Any], Any], compute: Callable[[Any], Any],
               raw_batches: Iterable[Any]) -> tuple:
    """The same work without overlap (prepare, then compute, batch after batch), with the
    same statistics: the baseline the pipeline is compared against."""
    stats = PipelineStats()
    results = []
    start = time.perf_counter()
    for raw in raw_batches:
        t0 = time.perf_counter()
        item = prepare(raw)
        t1 = time.perf_counter()
        results.append(compute(item))
        t2 = time.perf_counter()
        stats.prep_s += t1 - t0
        stats.busy_s += t2 - t1
        stats.compute_times.append(t2 - t1)
        stats.batches += 1
    stats.wall_s = time.perf_counter() - start
    return results, stats


def batched(iterable: Iterable[Any], size: int) -> Iterable[list]:
    """Consecutive lists of `size` items (the last one shorter)."""
    it = iter(iterable)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk


def token_batch_preparer(tokenizer, seq_len: int, pad_id: int = 0):
    """prepare() that tokenizes a list of texts (C++ tokenizer, GIL released), truncates
    or pads each to seq_len with pad_id, and stages an int32 array [len(texts), seq_len]
    and the true lengths."""
    import numpy as np

    def prepare(texts: List[str]):
        batch = np.full((len(texts), seq_len), pad_id, dtype=np.int32)
        lengths = np.zeros(len(texts), dtype=np.int32)
        for row, text in enumerate(texts):
            ids = tokenizer.encode(text, True, False)[:seq_len]
            batch[row, :len(ids)] = ids
            lengths[row] = len(ids)
        return batch, lengths

    return prepare
