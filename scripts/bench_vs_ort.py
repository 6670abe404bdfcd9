#!/usr/bin/env python3
"""Side-by-side CPU benchmark of samebits against ONNX Runtime on the PP-OCR models.

Both engines run the same model on the same deterministic input with the same thread count,
alternating in rounds (ORT block, samebits block, ORT block, ...) after warm-up; the table gives
each engine's median latency, the spread (p10-p90), the ratio, and the largest difference
between the two engines' outputs (a correctness check: samebits is not expected to equal ORT's
bits, only to be close).

    scripts/bench_vs_ort.py [--threads 2] [--rounds 3] [--runs 10] [--operation-set reproducible]
"""
import argparse, json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchlib"))
import peers  # noqa: E402

peers.ensure_harness_python(["numpy", "onnxruntime"])  # re-runs itself in the harness's venv
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

CACHE = os.environ.get("SAMEBITS_CACHE", os.path.expanduser("~/.cache/samebits"))
MODELS = os.path.join(CACHE, "rapidocr/rapidocr_onnxruntime/models")
CASES = [
    ("PP-OCRv4 det", "ch_PP-OCRv4_det_infer.onnx", (1, 3, 640, 640)),
    ("PP-OCR cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192)),
    ("PP-OCRv4 rec", "ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320)),
]
BIN = os.path.join(os.path.dirname(__file__), "..", "target", "release", "samebits")


def samebits_times(model, inp_path, name, threads, runs, opset, outdir):
    cmd = [BIN, "--threads", str(threads), "bench", model, "--input", f"{name}={inp_path}",
           "--runs", str(runs), "--warmup", "1", "--operation-set", opset, "--times-json",
           os.path.join(outdir, "times.json")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(outdir, "times.json")) as f:
        return json.load(f)["times_ms"]


def samebits_output(model, inp_path, name, threads, opset, outdir):
    out = os.path.join(outdir, "out")
    subprocess.run([BIN, "--threads", str(threads), "run", model, "--input", f"{name}={inp_path}",
                    "--out", out, "--operation-set", opset], check=True,
                   stderr=subprocess.DEVNULL)
    files = sorted(os.listdir(out))
    return np.load(os.path.join(out, files[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--operation-set", default="reproducible")
    args = ap.parse_args()
    rng = np.random.default_rng(20261122)
    rows = []
    for label, file, shape in CASES:
        model = os.path.join(MODELS, file)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        x = rng.uniform(-1, 1, size=shape).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            inp = os.path.join(tmp, "x.npy")
            np.save(inp, x)
            ref = sess.run(None, {name: x})[0]
            ours = samebits_output(model, inp, name, args.threads, args.operation_set, tmp)
            max_diff = float(np.max(np.abs(ours.astype(np.float64) - ref.astype(np.float64))))
            for _ in range(2):
                sess.run(None, {name: x})
            ort_t, sb_t = [], []
            for _ in range(args.rounds):
                for _ in range(args.runs):
                    t0 = time.perf_counter()
                    sess.run(None, {name: x})
                    ort_t.append((time.perf_counter() - t0) * 1e3)
                sb_t += samebits_times(model, inp, name, args.threads, args.runs,
                                       args.operation_set, tmp)
        med = lambda t: float(np.median(t))
        spread = lambda t: f"{np.percentile(t, 10):.2f}-{np.percentile(t, 90):.2f}"
        rows.append((label, "x".join(map(str, shape)), med(ort_t), spread(ort_t), med(sb_t),
                     spread(sb_t), med(ort_t) / med(sb_t), max_diff))
    print(f"CPU, {args.threads} threads, samebits operation set {args.operation_set}, "
          f"onnxruntime {ort.__version__}, {args.rounds} alternating rounds x {args.runs} runs")
    print()
    print("| model | input | ORT median ms | ORT p10-p90 | samebits median ms | samebits p10-p90 "
          "| speed vs ORT | max abs diff vs ORT |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]} | {r[4]:.2f} | {r[5]} | {r[6]:.2f}x | {r[7]:.2e} |")


if __name__ == "__main__":
    sys.exit(main())
