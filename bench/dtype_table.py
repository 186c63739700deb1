#!/usr/bin/python3
"""Markdown tables from `peer_bench --dtypes` and `peer_bench --mlp --dtype T` JSON lines
(docs/bench.md, "Storage dtypes").

    python3 bench/dtype_table.py RESULTS/*.jsonl
"""
import json
import sys


def rows(paths):
    """The JSON lines of every file; `_run` numbers the processes (each starts with an
    "info" line), so that nnc is paired with the peers of its own run."""
    run = 0
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    r = json.loads(line)
                    if r.get("kind") == "info":
                        run += 1
                    r["_run"] = run
                    yield r


def main(paths):
    lines = list(rows(paths))
    gemv = [r for r in lines if r.get("kind") == "dtype"]
    for threads in sorted({r["threads"] for r in gemv}):
        for n, k in sorted({(r["N"], r["K"]) for r in gemv if r["threads"] == threads}):
            sel = [r for r in gemv if r["threads"] == threads and (r["N"], r["K"]) == (n, k)]
            f32 = next((r for r in sel if r["dtype"] == "f32"), None)
            print(f"\n#### W {n}×{k}, {threads} thread{'s' if threads > 1 else ''}\n")
            print("| dtype | weight bytes | batch 1 from DRAM µs best / median | weight GB/s | read probe GB/s"
                  " | share of probe | speed-up vs f32 (median) | batch 1 from cache µs best / median"
                  " | batch 64 GFLOP/s | batch 64, activations in the dtype: GFLOP/s (× f32) | pack ms |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for r in sel:
                speed = f32["dram_median_us"] / r["dram_median_us"] if f32 else float("nan")
                b64 = f"{r['b64_gflops']:.1f}" if "b64_gflops" in r else "–"
                act = "–"
                if "b64_act_gflops" in r and f32 and "b64_gflops" in f32:
                    act = f"{r['b64_act_gflops']:.1f} ({r['b64_act_gflops'] / f32['b64_gflops']:.2f}×)"
                print(f"| {r['dtype']} | {r['weight_bytes']:,.0f} | {r['dram_best_us']:.0f} / {r['dram_median_us']:.0f}"
                      f" | {r['dram_weight_gbs']:.2f} | {r['probe_gbs']:.2f} | {100 * r['share_of_probe']:.0f} %"
                      f" | {speed:.2f}× | {r['cache_best_us']:.0f} / {r['cache_median_us']:.0f} | {b64} | {act}"
                      f" | {r['pack_ms']:.0f} |")
    mlp = [r for r in lines if r.get("kind") == "mlp"]
    if mlp:
        print("\n#### MLP 784→256→128→10 (examples/seeds/mnist.nn), 1 thread: µs per call, best / median\n")
        print("| batch | nnc weights | nnc | oneDNN f32 chain (same run) | nnc / oneDNN (best) | nnc's max rel. diff. vs oneDNN |")
        print("|---:|---|---:|---:|---:|---:|")
        order = ["f32", "f16", "bf16", "i8", "i4"]
        for r in sorted(mlp, key=lambda r: (r["batch"], order.index(r["dtype"]), r.get("activations", "f32") != "f32")):
            if r["peer"] != "nnc":
                continue
            peer = next((p for p in mlp if p["peer"] == "onednn_chain" and p["batch"] == r["batch"]
                         and p["_run"] == r["_run"]), None)
            ratio = f"{r['best_us'] / peer['best_us']:.2f}" if peer else "–"
            err = f"{peer['max_rel_err_vs_nnc']:.2g}" if peer else "–"
            one = f"{peer['best_us']:.1f} / {peer['median_us']:.1f}" if peer else "–"
            weights = r["dtype"] + (f", {r['activations']} activations" if r.get("activations", "f32") != "f32" else "")
            print(f"| {r['batch']} | {weights} | {r['best_us']:.1f} / {r['median_us']:.1f} | {one} | {ratio} | {err} |")


if __name__ == "__main__":
    main(sys.argv[1:])
