#!/usr/bin/env python3
"""The model zoo (zoo/models.json) across machines: CPU receipts made here, verified bit for bit on
a GPU (or any other machine), with the GPU's fallback steps counted.

    scripts/zoo_gpu_check.py bundle DIR [--samebits BIN]
        On a CPU machine with the zoo in the cache (scripts/setup.sh): writes each model's
        inputs (seeded, as zoo/models.json says) and runs it with a receipt, into DIR with the
        model files beside them, so that DIR can be copied anywhere whole.
    scripts/zoo_gpu_check.py verify DIR [--samebits BIN] [--device cuda]
        Where DIR was copied: `samebits verify --runs RUNS` of every receipt on DEVICE (exit 0
        only when all outputs of every run are bit-identical), then one `samebits bench` run per model on DEVICE, whose
        summary line counts the steps that ran on GPU kernels and those that fell back to the CPU.
        With --ort-rounds N (N > 0): each model's latency against ONNX Runtime's CUDA execution
        provider on the same GPU (the onnxruntime-gpu wheel, importable with numpy there;
        TF32 off, so both engines compute in float32), the engines alternating for N rounds
        of `samebits bench` (20 runs after warm-up) and 20 ORT runs after warm-up; medians and
        the ratio (above 1x: samebits is faster).

Standard library only (no numpy) for bundle and verify: the GPU machines reach no package index;
--ort-rounds imports onnxruntime and numpy.
"""
import argparse, json, os, random, shutil, struct, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.environ.get("SAMEBITS_CACHE") or os.path.expanduser("~/.cache/samebits")
ZOO = os.path.join(ROOT, "zoo", "models.json")


def write_npy(path, dtype, shape, values):
    """A version 1.0 .npy file of little-endian f4 or i8 values (the format numpy documents)."""
    descr, fmt = {"f32": ("<f4", "f"), "i64": ("<i8", "q")}[dtype]
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}{fmt}", *values))


def inputs_of(model, rng):
    """(name, dtype, shape, values) of each input of a zoo entry."""
    for i in model["inputs"]:
        n = 1
        for d in i["shape"]:
            n *= d
        if "fill" in i:
            values = [i["fill"]] * n
        elif i["dtype"] == "i64":
            values = [rng.randrange(i["low"], i["high"]) for _ in range(n)]
        else:
            values = [rng.uniform(i["low"], i["high"]) for _ in range(n)]
        yield i["name"], i["dtype"], i["shape"], values


def bundle(args):
    os.makedirs(args.dir, exist_ok=True)
    for model in json.load(open(ZOO))["models"]:
        source = os.path.join(CACHE, model["path"])
        if not os.path.exists(source):
            print(f"SKIPPED {model['id']}: {source} not found (run scripts/setup.sh)", file=sys.stderr)
            continue
        mid = model["id"]
        os.makedirs(os.path.join(args.dir, mid), exist_ok=True)
        target = os.path.join(args.dir, mid, os.path.basename(source))
        if not os.path.exists(target):
            shutil.copyfile(source, target)
        cmd = [args.samebits, "run", os.path.join(mid, os.path.basename(source)), "--out",
               os.path.join(mid, "out"), "--receipt", os.path.join(mid, "receipt.json")]
        rng = random.Random(mid)
        for k, (name, dtype, shape, values) in enumerate(inputs_of(model, rng)):
            path = os.path.join(mid, f"input{k}.npy")
            write_npy(os.path.join(args.dir, path), dtype, shape, values)
            cmd += ["--input", f"{name}={path}"]
        subprocess.run(cmd, cwd=args.dir, check=True, stderr=subprocess.DEVNULL)
        print(f"{mid}: receipt written", flush=True)


def samebits_median(args, cmd):
    """The median latency in ms that `samebits bench` prints, or None when it failed."""
    done = subprocess.run(cmd, cwd=args.dir, capture_output=True, text=True)
    for line in (done.stdout + done.stderr).splitlines():
        if done.returncode == 0 and line.startswith("median"):
            return float(line.split()[1])
    return None


def compare_ort(args, model, mid, cmd):
    """Alternating rounds of samebits and ONNX Runtime (CUDA EP) on one model; prints medians."""
    import statistics, time
    import numpy as np
    import onnxruntime as ort
    options = ort.SessionOptions()
    provider = ("CUDAExecutionProvider", {"device_id": int(args.device.partition(":")[2] or 0),
                                          "use_tf32": 0})
    session = ort.InferenceSession(os.path.join(args.dir, mid, os.path.basename(model["path"])),
                                   options, providers=[provider])
    if session.get_providers()[0] != "CUDAExecutionProvider":
        print(f"{mid}: ONNX Runtime did not take the CUDA provider: {session.get_providers()}")
        return 1
    feeds = {i["name"]: np.load(os.path.join(args.dir, mid, f"input{k}.npy"))
             for k, i in enumerate(model["inputs"])}
    for _ in range(5):
        session.run(None, feeds)
    ours, theirs = [], []
    bench = cmd + ["--runs", "20", "--warmup", "3"]
    for _ in range(args.ort_rounds):
        times = []
        for _ in range(20):
            start = time.perf_counter()
            session.run(None, feeds)
            times.append((time.perf_counter() - start) * 1e3)
        theirs.append(statistics.median(times))
        median = samebits_median(args, bench)
        if median is None:
            print(f"{mid}: samebits bench failed")
            return 1
        ours.append(median)
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{mid}: GPU latency: samebits {a:.3f} ms, ONNX Runtime {ort.__version__} CUDA EP "
          f"{b:.3f} ms, ratio {b / a:.2f}x (rounds: samebits {ours}, ORT "
          f"{[round(t, 3) for t in theirs]})", flush=True)
    return 0


def verify(args):
    failed = 0
    # The list the bundle was made from (bundle copies it in).
    for model in json.load(open(os.path.join(args.dir, "models.json")))["models"]:
        mid = model["id"]
        receipt = os.path.join(mid, "receipt.json")
        if not os.path.exists(os.path.join(args.dir, receipt)):
            print(f"SKIPPED {mid}: no receipt in {args.dir}", file=sys.stderr)
            continue
        done = subprocess.run([args.samebits, "verify", receipt, "--device", args.device,
                               "--runs", str(args.runs)], cwd=args.dir,
                              capture_output=True, text=True)
        last = (done.stdout + done.stderr).strip().splitlines()[-1:]
        print(f"{mid}: verify on {args.device}: {'ok' if done.returncode == 0 else 'FAILED'}: {' '.join(last)}",
              flush=True)
        failed += done.returncode != 0
        cmd = [args.samebits, "bench", os.path.join(mid, os.path.basename(model["path"])),
               "--device", args.device]
        for k, i in enumerate(model["inputs"]):
            cmd += ["--input", f"{i['name']}={os.path.join(mid, f'input{k}.npy')}"]
        bench = subprocess.run(cmd + ["--runs", "3", "--warmup", "1"], cwd=args.dir,
                               capture_output=True, text=True)
        text = (bench.stdout + bench.stderr).splitlines()
        lines = [l.strip() for l in text
                 if "steps on GPU" in l or l.startswith("median") or l.startswith("plan steps")]
        print(f"{mid}: bench on {args.device}: " + (" | ".join(lines) if bench.returncode == 0
                                                      else "FAILED: " + " ".join(text[-2:])), flush=True)
        failed += bench.returncode != 0
        if args.ort_rounds > 0:
            failed += compare_ort(args, model, mid, cmd)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["bundle", "verify"])
    ap.add_argument("dir")
    ap.add_argument("--samebits", default=os.path.join(ROOT, "target", "release", "samebits"))
    ap.add_argument("--device", default="cuda", help="(verify) where to re-run: cuda, cuda:N or cpu")
    ap.add_argument("--runs", type=int, default=2,
                    help="(verify) runs per receipt in one process (the second and later go through "
                         "the plan specialised to the input shapes)")
    ap.add_argument("--ort-rounds", type=int, default=0,
                    help="(verify) rounds of a latency comparison with ONNX Runtime's CUDA "
                         "execution provider (0: none)")
    args = ap.parse_args()
    args.dir = os.path.abspath(args.dir)
    args.samebits = os.path.abspath(args.samebits)
    if args.mode == "bundle":
        bundle(args)
        shutil.copyfile(ZOO, os.path.join(args.dir, "models.json"))
        return 0
    return verify(args)


if __name__ == "__main__":
    sys.exit(main())
