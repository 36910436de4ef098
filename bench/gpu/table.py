#!/usr/bin/env python3
"""Merges the GPU kit's measurements into one table (bench/gpu/run).

Reads, from the directory given: lathe-<model>.md (lathe_bench --depths rows:
| lathe | model | dtype | weights MiB | test | tok/s | GB/s | roofline |) and
llama-<model>.jsonl (llama-bench -o jsonl), where <model> is the bench model's
name (bench-8b-q4_k_m; a suffix after it, -absorbed, labels a run of the
same model forced another way); prints one Markdown row per model and test with both
engines' tok/s, their ratio, and lathe's decode roofline fraction.
"""
import glob
import json
import os
import sys


def lathe_rows(directory):
    rows = {}
    for path in sorted(glob.glob(os.path.join(directory, "lathe-*.md"))):
        # The file's name labels its rows: lathe-bench-mla-f16-absorbed.md is
        # the same model run another way (a forced form), a row of its own.
        label = os.path.basename(path)[len("lathe-"):-len(".md")]
        with open(path) as f:
            for line in f:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) == 8 and cells[0] == "lathe":
                    _, model, dtype, mib, test, tps, gbs, roof = cells
                    rows[(label if label.startswith(model) else model, test)] = {
                        "model": model, "dtype": dtype, "mib": mib, "tps": float(tps), "gbs": gbs, "roof": roof}
    return rows


def llama_rows(directory):
    rows = {}
    for path in sorted(glob.glob(os.path.join(directory, "llama-*.jsonl"))):
        model = os.path.basename(path)[len("llama-"):-len(".jsonl")]
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                test = (f"pp{r['n_prompt']}" if r["n_prompt"] > 0 else f"tg{r['n_gen']}") + f" @ d{r.get('n_depth', 0)}"
                rows[(model, test)] = {"tps": float(r["avg_ts"]), "gpu": r.get("gpu_info", "")}
    return rows


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "."
    ours, theirs = lathe_rows(directory), llama_rows(directory)
    gpus = sorted({r["gpu"] for r in theirs.values()})
    if gpus:
        print("llama.cpp on: " + ", ".join(g or "its CPU backend (no Vulkan device found: not a Vulkan number)" for g in gpus))
        print()
    print("| model | dtype | weights MiB | test | lathe tok/s | llama.cpp tok/s | lathe ÷ llama.cpp | lathe decode GB/s | roofline fraction |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    for key in sorted(set(ours) | set(theirs), key=lambda k: (k[0], k[1].split(" @ d")[0][:2], int(k[1].split(" @ d")[1]))):
        # A run another way (a forced form or class: bench-8b-q4_k_m-gpu-dot)
        # is compared with llama.cpp's run of its model.
        a = ours.get(key)
        b = theirs.get((a["model"], key[1]) if a else key)
        cells = [key[0], a["dtype"] if a else "", a["mib"] if a else "", key[1],
                 f"{a['tps']:.1f}" if a else "–", f"{b['tps']:.1f}" if b else "–",
                 f"{a['tps'] / b['tps']:.2f}×" if a and b and b["tps"] > 0 else "–",
                 a["gbs"] if a else "", a["roof"] if a else ""]
        print("| " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
