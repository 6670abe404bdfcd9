"""Statistics and presentation for scripts/bench.py: speed rows (medians, p10-p90 spreads,
samebits / peer ratios), reproducibility scoreboard cells, the markdown report, the chart
description that samebits-bench-report draws, and the README section between markers."""
import numpy as np

OPERATION_SETS = ["reproducible", "deterministic", "default"]
# The exact-integer products of GGUF weights (docs/contract.md, int8-products): measured on the
# CPU LLM rows only (an ONNX model has no GGUF products; the GPU runs them on the CPU).
INT8_SET = "reproducible-int8"
README_START = "<!-- bench:start (scripts/bench.py writes this section) -->"
README_END = "<!-- bench:end -->"
PROBES = [("threads", "1 vs 2 threads (CPU)"), ("batch", "batch 1 vs 8 (CPU)"),
          ("prefill_decode", "prefill vs decode (CPU)"), ("gpu_batch", "batch 1 vs 8 (GPU)"),
          ("gpu_prefill_decode", "prefill vs decode (GPU)"), ("cpu_gpu", "CPU vs GPU")]


def stats(samples):
    if not samples:
        return None
    a = np.asarray(samples, dtype=np.float64)
    return {"median": float(np.median(a)), "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "n": len(samples)}


def speed_row(group, label, test, threads, device, unit, peer, peer_samples, own, target, note=None):
    """One row: a workload timed on the peer and on samebits in each operation set. Ratios are
    samebits speed / peer speed (>1: samebits faster), from medians."""
    row = {"group": group, "label": label, "test": test, "threads": threads, "device": device, "unit": unit,
           "peer": peer, "peer_stats": stats(peer_samples), "peer_samples": peer_samples, "target": target,
           "note": note, "samebits": {}}
    for s in OPERATION_SETS + [INT8_SET]:
        st = stats(own.get(s, []))
        ratio = None
        if st and row["peer_stats"]:
            p, o = row["peer_stats"]["median"], st["median"]
            ratio = o / p if unit == "tok/s" else p / o
        row["samebits"][s] = {"stats": st, "samples": own.get(s, []), "ratio": ratio}
    return row


def cell(same, max_abs_diff=None):
    return {"same": bool(same), "max_abs_diff": max_abs_diff}


def na(reason):
    return {"na": reason}


def fmt_value(st, unit):
    if st is None:
        return "-"
    digits = 1 if st["median"] >= 10 else 3
    return f"{st['median']:.{digits}f} ({st['p10']:.{digits}f}-{st['p90']:.{digits}f})"


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"


def speed_table(rows):
    """The rows as a markdown table. A target is met by a reproducible set (reproducible, or
    reproducible-int8 where measured: same bits everywhere either way); the cell names which."""
    lines = ["| workload | threads | peer | peer median (p10-p90) | samebits reproducible median (p10-p90) "
             "| reproducible vs peer | reproducible-int8 vs peer | deterministic vs peer | default vs peer | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        unit = r["unit"]
        own = r["samebits"]
        ratio = {s: (own.get(s) or {}).get("ratio") for s in OPERATION_SETS + [INT8_SET]}
        met = [s for s in ("reproducible", INT8_SET) if ratio[s] is not None and r["target"] is not None
               and ratio[s] >= r["target"]]
        target = "-" if r["target"] is None else f"≥{r['target']:g}x " + (
            ("met" if "reproducible" in met else f"met ({INT8_SET})") if met else "**not met**")
        threads = "GPU" if r["device"] == "gpu" else str(r["threads"])
        repro = fmt_value(own["reproducible"]["stats"], unit) if own["reproducible"]["stats"] else (
            r["note"] or "not measured")
        lines.append(f"| {r['label']} ({unit}) | {threads} | {r['peer']} | {fmt_value(r['peer_stats'], unit)} | "
                     f"{repro} | {fmt_ratio(ratio['reproducible'])} | {fmt_ratio(ratio[INT8_SET])} | "
                     f"{fmt_ratio(ratio['deterministic'])} | {fmt_ratio(ratio['default'])} | {target} |")
    return "\n".join(lines)


def fmt_cell(c):
    if c is None:
        return "not measured"
    if "na" in c:
        return f"n/a ({c['na']})"
    if c["same"]:
        return "same bits"
    diff = c.get("max_abs_diff")
    return "**bits differ**" + (f" (max abs diff {diff:.1e})" if diff else "")


def merged_board(results):
    board = {name: dict(cells) for name, cells in results["scoreboard"].items()}
    gpu = results.get("gpu") or {}
    for name, cells in gpu.get("scoreboard", {}).items():
        row = board.setdefault(name, {})
        for key, value in cells.items():
            row["cpu_gpu" if key == "cpu_gpu" else f"gpu_{key}"] = value
    for name, row in board.items():
        if name.startswith("samebits"):
            for key in ("cpu_gpu", "gpu_batch", "gpu_prefill_decode"):
                row.setdefault(key, na("no GPU run of this model in docs/bench/gpu.json"))
        if name.startswith("ONNX Runtime"):
            row.setdefault("cpu_gpu", na("CPU provider only on the GPU machine"))
    return board


def scoreboard_table(results):
    lines = ["| engine, model | " + " | ".join(title for _, title in PROBES) + " |",
             "|---|" + "---|" * len(PROBES)]
    for name, row in merged_board(results).items():
        lines.append(f"| {name} | " + " | ".join(fmt_cell(row.get(key)) for key, _ in PROBES) + " |")
    return "\n".join(lines)


def markdown(results):
    meta = results["meta"]
    speed = results["speed"]
    gpu = results.get("gpu")
    parts = [
        f"Measured {meta['date']} by `{meta['command']}` in {meta['minutes']} minutes on {meta['machine']}. "
        f"Peers: llama.cpp {meta['versions']['llama.cpp']}, ONNX Runtime {meta['versions']['onnxruntime']}, "
        f"PyTorch {meta['versions'].get('torch', '-')}. Engines alternate (peer, then samebits in each operation set) "
        f"in {meta['rounds']['llm']} rounds (LLM) / {meta['rounds']['onnx']} rounds (ONNX) after warm-up; "
        "values are medians with the p10-p90 spread; ratios are samebits speed / peer speed (above 1x: "
        "samebits is faster). The machine is shared with other jobs: absolute numbers drift, the ratios "
        "of one run are what to compare.",
        *([f"**Caution: the load average ({meta['load_average']:.0f}) was above the core count "
           f"({meta['cores']}).** Engines whose worker threads spin-wait (llama.cpp, ONNX Runtime) lose far "
           "more than samebits when their threads are descheduled, so these ratios say little about speed on "
           "a quiet machine; re-run there."] if meta.get("load_average", 0) > meta.get("cores", 1 << 30) else []),
        "![samebits vs peers](docs/bench/chart.png)",
        "**SmolLM2-135M-Instruct Q4_1, CPU** (pp = one prefill pass of N tokens, tg = N decode steps of one "
        "token; PyTorch runs the same model dequantized to float32, eagerly):",
        speed_table([r for r in speed if r["group"] == "llm-cpu"]),
        *[part for kept in results.get("other_cpus", []) for part in (
            f"**The same on {kept['kind']}**, {kept['meta']['cores']} cores (kept from its last "
            f"`{kept['meta']['command']}` run, {kept['meta']['date']}, in docs/bench/cpu/; one table per CPU kind"
            + (f"; {kept['meta']['source']}" if kept["meta"].get("source") else "") + "):",
            speed_table(kept["speed"]))],
        f"**PP-OCR, the model zoo (zoo/models.json) and ONNX node-test models, CPU, {meta['threads_onnx']} "
        "threads** (latency per run):",
        speed_table([r for r in speed if r["group"] in ("ocr", "zoo", "node")]),
        *zoo_accuracy_parts(results.get("zoo_accuracy")),
    ]
    if gpu:
        parts += [f"**GPU: {gpu['device']}** (from `scripts/bench.py --gpu`, {gpu['date']}):",
                  speed_table(gpu["speed"])]
        parts += [f"- {n}" for n in gpu.get("notes", [])]
    else:
        parts.append("**GPU**: not measured yet (`scripts/bench.py --gpu` on the GPU machine writes "
                     "docs/bench/gpu.json).")
    parts += ["**Reproducibility scoreboard** (measured: does each engine's output change, bit for bit?):",
              scoreboard_table(results)]
    return "\n\n".join(parts) + "\n"


def zoo_accuracy_parts(rows):
    """The zoo's closeness to ONNX Runtime: each output's relative L2 distance (target < 1e-5)."""
    if not rows:
        return []
    lines = ["| zoo model | outputs: relative L2 distance from ONNX Runtime (reproducible set) | < 1e-5 |",
             "|---|---|---|"]
    for row in rows:
        cells = [f"{o['name']}: " + (f"{o['rel_l2']:.1e}" if "rel_l2" in o else ("equal" if o["equal"] else "**differ**"))
                 for o in row["outputs"]]
        ok = all(o.get("rel_l2", 0.0) < 1e-5 and o.get("equal", True) for o in row["outputs"])
        lines.append(f"| {row['label']} | {'; '.join(cells)} | {'met' if ok else '**not met**'} |")
    return ["**Model zoo vs ONNX Runtime** (same inputs, 2 threads):", "\n".join(lines)]


def chart(results):
    rows = []
    for r in results["speed"] + ((results.get("gpu") or {}).get("speed", [])):
        ratios = [r["samebits"][s]["ratio"] for s in OPERATION_SETS]
        if all(v is None for v in ratios):
            continue
        where = "GPU" if r["device"] == "gpu" else f"{r['threads']}t"
        name = r["label"] if len(r["label"]) <= 40 else r["label"][:39] + "…"  # fits the label column
        rows.append({"label": f"{name}, {where} vs {r['peer']}", "ratios": ratios, "target": r["target"]})
    meta = results["meta"]
    return {"title": "samebits speed relative to its peers (samebits / peer, medians)",
            "subtitle": f"{meta['date']}, {meta['machine']}", "series": OPERATION_SETS, "rows": rows}


def update_readme(path, markdown_text):
    """Replaces the README section between the markers (appends it under '## Benchmarks' if absent)."""
    text = open(path).read()
    section = f"{README_START}\n{markdown_text}{README_END}"
    if README_START in text and README_END in text:
        before = text.split(README_START)[0]
        after = text.split(README_END, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip("\n") + "\n\n## Benchmarks (`scripts/bench.py`)\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)
