"""fpgallm.pipeline.HostPipeline: ordering, exactly-once, back-pressure, and shutdown on a
failing batch or Ctrl-C without a hang or a leftover thread."""
import _thread
import threading
import time

import numpy as np
import pytest

import fpgallm
from fpgallm.pipeline import HostPipeline, PipelineError, batched, run_serial, token_batch_preparer
from conftest import MODEL, SAMPLE_TEXT, TOKENIZER

WATCHDOG_S = 30


def pipeline_threads():
    return [t for t in threading.enumerate() if t.name.startswith("fpgallm-")]


def run_with_watchdog(fn):
    """Runs fn() in a thread; fails (instead of hanging the suite) when it does not return."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(WATCHDOG_S)
    assert not t.is_alive(), "pipeline hung"
    if "error" in box:
        raise box["error"]
    return box["value"]


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.prepared, self.computed = [], []
        self.outstanding = self.max_outstanding = 0

    def prepare(self, i):
        with self.lock:
            self.prepared.append(i)
            self.outstanding += 1
            self.max_outstanding = max(self.max_outstanding, self.outstanding)
        return np.full((4, 8), i, dtype=np.float32)

    def compute(self, staged):
        i = int(staged[0, 0])
        with self.lock:
            self.computed.append(i)
            self.outstanding -= 1
        return i * 10


@pytest.mark.parametrize("prep_threads", [1, 3])
def test_every_batch_once_in_order(prep_threads):
    r = Recorder()
    results, stats = run_with_watchdog(
        lambda: HostPipeline(r.prepare, r.compute, prep_threads=prep_threads, queue_depth=2).run(range(50)))
    assert results == [i * 10 for i in range(50)]
    assert sorted(r.computed) == list(range(50)) and sorted(r.prepared) == list(range(50))
    assert stats.batches == 50 and 0 < stats.busy_fraction <= 1
    assert pipeline_threads() == []


def test_back_pressure_bounds_the_staged_batches():
    r = Recorder()

    def slow_compute(staged):
        time.sleep(0.01)
        return r.compute(staged)

    run_with_watchdog(lambda: HostPipeline(r.prepare, slow_compute, prep_threads=2, queue_depth=3).run(range(30)))
    # prepared but not yet computed: at most the queue, one in each host thread's hands,
    # and the one on the accelerator
    assert r.max_outstanding <= 3 + 2 + 1


def test_a_stalled_host_thread_does_not_let_the_others_run_ahead():
    # The batch the accelerator needs next is stuck in one host thread; the others must not
    # prepare the rest of the input meanwhile (CI once saw all 100 prepared this way).
    r = Recorder()

    def prepare(i):
        if i == 3:
            time.sleep(0.3)
        return r.prepare(i)

    results, _ = run_with_watchdog(
        lambda: HostPipeline(prepare, r.compute, prep_threads=3, queue_depth=2).run(range(100)))
    assert results == [i * 10 for i in range(100)]
    assert r.max_outstanding <= 2 + 3


@pytest.mark.parametrize("prep_threads", [1, 3])
@pytest.mark.parametrize("stage", ["compute", "prepare"])
def test_a_failing_batch_stops_the_pipeline_with_its_error(stage, prep_threads):
    r = Recorder()
    bad = 7

    def prepare(i):
        if stage == "prepare" and i == bad:
            raise RuntimeError("tokenizer exploded")
        return r.prepare(i)

    def compute(staged):
        if stage == "compute" and int(staged[0, 0]) == bad:
            raise RuntimeError("accelerator fault")
        time.sleep(0.002)
        return r.compute(staged)

    with pytest.raises(PipelineError) as info:
        run_with_watchdog(lambda: HostPipeline(prepare, compute, prep_threads=prep_threads, queue_depth=2).run(range(100)))
    err = info.value
    assert err.batch == bad and err.stage == stage
    assert isinstance(err.__cause__, RuntimeError)
    # nothing lost before the failure, nothing computed twice, nothing after it computed
    assert sorted(err.completed) == list(range(bad))
    assert all(err.completed[i] == i * 10 for i in range(bad))
    assert sorted(r.computed) == list(range(bad))
    assert len(r.prepared) < 100  # it stopped instead of preparing everything
    assert pipeline_threads() == []


def test_failing_input_iterable():
    def source():
        yield 0
        raise OSError("disk gone")

    r = Recorder()
    with pytest.raises(PipelineError, match="disk gone"):
        run_with_watchdog(lambda: HostPipeline(r.prepare, r.compute).run(source()))
    assert pipeline_threads() == []


def test_ctrl_c_stops_every_thread():
    r = Recorder()

    def compute(staged):
        time.sleep(0.02)
        return r.compute(staged)

    threading.Timer(0.3, _thread.interrupt_main).start()
    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        HostPipeline(r.prepare, compute, queue_depth=2).run(range(10_000))
    assert time.perf_counter() - started < WATCHDOG_S
    assert pipeline_threads() == []
    assert len(r.computed) == len(set(r.computed)) < 10_000


def test_tokenize_pad_stage_and_compute_on_the_matrix_unit():
    m = fpgallm.load(MODEL)
    tok = fpgallm.Tokenizer(m, TOKENIZER)
    stories = open(SAMPLE_TEXT, encoding="utf-8").read().splitlines()[:12]
    embedding = np.array(m.weights()["token_embedding"])
    weight = np.array(m.weights()["layers.0.w1"])
    prepare_tokens = token_batch_preparer(tok, seq_len=64)

    def prepare(texts):
        batch, lengths = prepare_tokens(texts)
        return embedding[batch.reshape(-1)], batch, lengths

    def compute(staged):
        x, batch, lengths = staged
        return fpgallm.linear_int8(x, weight, 1), batch, lengths

    results, stats = run_with_watchdog(lambda: HostPipeline(prepare, compute).run(batched(stories, 4)))
    serial, _ = run_serial(prepare, compute, batched(stories, 4))
    assert len(results) == 3 and stats.batches == 3
    for (y, batch, lengths), (y_s, batch_s, _) in zip(results, serial):
        assert np.array_equal(y, y_s) and np.array_equal(batch, batch_s)
        assert batch.shape == (4, 64) and (batch[:, 0] == fpgallm.BOS).all()
        row = 0
        ids = tok.encode(stories[row], True, False)[:64]
        assert lengths[row] == len(ids)
        break
