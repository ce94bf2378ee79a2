#!/usr/bin/python3
"""How busy the host pipeline keeps the accelerator backend when host preparation takes
about as long as the accelerator's compute.

Per batch of 16 texts (the first 240 characters of the stories of
models/tinystories-valid-sample.txt, cycled):
  host (prepare): tokenize with the C++ tokenizer, pad/truncate to 64 tokens, look the
                  tokens up in an embedding table [512, K = 256] and stage the activations
                  X [16*64, K] as one contiguous float32 array;
  accelerator (compute): one linear layer X W^T on the int8 matrix unit (C simulation,
                  fpgallm._core.linear_int8, one thread, GIL released), W [N, K].
N is sized at start so that compute time ~ prepare time (the ratio is reported).
Serial (prepare then compute, no overlap) and the pipeline with 1 and with 2 host threads
(queue depth 2) run the same batches; busy fraction = time inside compute / wall time.
With one host thread and compute ~ prepare, every hiccup of the host shows as an idle
accelerator; a second host thread gives the slack that keeps it busy.

    PYTHONPATH=python /usr/bin/python3 bench/bench_pipeline.py [--batches 40] [--repeats 3] [--json]
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402

import fpgallm  # noqa: E402
from fpgallm.pipeline import HostPipeline, batched, run_serial, token_batch_preparer  # noqa: E402

BATCH, SEQ, K, CHARS = 16, 64, 256, 240


def median_time(fn, arg, n=5):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    model = fpgallm.load(str(REPO / "models" / "stories260K.bin"))
    tok = fpgallm.Tokenizer(model, str(REPO / "models" / "tok512.bin"))
    stories = [s[:CHARS] for s in (REPO / "models" / "tinystories-valid-sample.txt").read_text().splitlines() if s]
    rng = np.random.default_rng(0)
    embedding = rng.standard_normal((model.config["vocab_size"], K)).astype(np.float32)
    tokenize = token_batch_preparer(tok, SEQ)

    def prepare(texts):
        ids, _ = tokenize(texts)
        return np.ascontiguousarray(embedding[ids.reshape(-1)])

    raw = [[stories[(b * BATCH + i) % len(stories)] for i in range(BATCH)] for b in range(args.batches)]

    # size the accelerator's work so that compute ~ prepare
    sample = prepare(raw[0])
    prep_s = median_time(prepare, raw[0])
    n_probe = 256
    w_probe = rng.standard_normal((n_probe, K)).astype(np.float32)
    probe_s = median_time(lambda x: fpgallm.linear_int8(x, w_probe, 1), sample)
    n_rows = max(16, int(round(n_probe * prep_s / probe_s / 16)) * 16)
    weight = rng.standard_normal((n_rows, K)).astype(np.float32)

    def compute(x):
        return fpgallm.linear_int8(x, weight, 1)

    compute_s = median_time(compute, sample)

    configs = {"serial": None, "pipeline_1_host_thread": 1, "pipeline_2_host_threads": 2}
    runs = {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, threads in configs.items():
            if threads is None:
                _, stats = run_serial(prepare, compute, raw)
            else:
                _, stats = HostPipeline(prepare, compute, prep_threads=threads, queue_depth=2).run(raw)
            runs[name].append(stats.as_dict())

    def summarize(name):
        busy = [r["busy_fraction"] for r in runs[name]]
        walls = [r["wall_s"] for r in runs[name]]
        return {"busy_fraction_mean": statistics.mean(busy),
                "busy_fraction_sd": statistics.stdev(busy) if len(busy) > 1 else 0.0,
                "busy_fraction_min": min(busy), "wall_s_mean": statistics.mean(walls), "runs": runs[name]}

    summary = {"batches": args.batches, "repeats": args.repeats, "batch": BATCH, "seq_len": SEQ, "K": K,
               "N": n_rows, "prepare_s": prep_s, "compute_s": compute_s,
               "compute_over_prepare": compute_s / prep_s,
               "results": {name: summarize(name) for name in configs}}
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"per batch: prepare {prep_s * 1e3:.1f} ms, compute {compute_s * 1e3:.1f} ms "
          f"(compute/prepare {compute_s / prep_s:.2f}; X [{BATCH * SEQ}, {K}] x W [{n_rows}, {K}] int8); "
          f"{args.repeats} runs of {args.batches} batches")
    serial_wall = summary["results"]["serial"]["wall_s_mean"]
    print("| mode | accelerator busy (mean ± sd, min) | wall s | speed-up |")
    print("| --- | --- | --- | --- |")
    for name in configs:
        r = summary["results"][name]
        print(f"| {name} | {r['busy_fraction_mean']:.1%} ± {r['busy_fraction_sd']:.1%}, "
              f"{r['busy_fraction_min']:.1%} | {r['wall_s_mean']:.2f} | {serial_wall / r['wall_s_mean']:.2f}x |")


if __name__ == "__main__":
    main()
