#!/usr/bin/python3
"""Markdown tables from `peer_bench --dtypes` (nnc, the plain loop, oneDNN) and
`peer_bench --mlp --dtype T [--activations A]` JSON lines
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
    peers = [r for r in lines if r.get("kind") == "dtype_peer"]

    def mine(r, dtype):
        """nnc's line of the same run for the peer's line r."""
        return next((g for g in gemv if g["_run"] == r["_run"] and g["dtype"] == dtype and g["N"] == r["N"]), None)

    def per_thread_count(rows, title, header, format_row):
        for threads in sorted({r["threads"] for r in rows}):
            print(f"\n#### {title}, {threads} thread{'s' if threads > 1 else ''}\n")
            print("| " + " | ".join(h for h, _ in header) + " |")
            print("|" + "|".join(a for _, a in header) + "|")
            for r in rows:
                line = format_row(r) if r["threads"] == threads else None
                if line:
                    print(line)

    def plain_row(r):
        m = mine(r, r["dtype"])
        if not m:
            return None
        return (f"| {r['N']}×{r['K']} | {r['dtype']} | {r['weight_bytes']:,} | {m['dram_median_us']:.0f}"
                f" | {r['dram_median_us']:.0f} | {m['dram_median_us'] / r['dram_median_us']:.2f}"
                f" | {m['cache_median_us']:.0f} | {r['cache_median_us']:.0f}"
                f" | {m['cache_median_us'] / r['cache_median_us']:.2f} |")

    def onednn_row(r):
        if "refused" in r:
            return f"| {r['mode']} | {r['batch']} | refused: {r['refused']} | – | – | – | – |"
        m = mine(r, "bf16" if r["mode"].startswith("bf16") else "i8" if r["mode"].startswith("s8") else None)
        key = "b64_act_median_us" if r["batch"] == 64 else "b1_act_median_us"
        if not m or key not in m:
            return f"| {r['mode']} | {r['batch']} | {r['median_us']:.0f} | {r['impl']} | – | – | – |"
        return (f"| {r['mode']} | {r['batch']} | {r['median_us']:.0f} | {r['impl']} | {m[key]:.0f}"
                f" | {m.get('products', '')} | {m[key] / r['median_us']:.2f} |")

    per_thread_count([r for r in peers if r["peer"] == "plain_loop"],
                     "Batch 1: nnc against a plain AVX-512 loop over the same storage (µs median; nnc / loop)",
                     [("W", "---"), ("dtype", "---"), ("weight bytes (loop)", "---:"), ("from DRAM: nnc", "---:"),
                      ("loop", "---:"), ("nnc / loop", "---:"), ("from cache: nnc", "---:"), ("loop", "---:"),
                      ("nnc / loop", "---:")], plain_row)
    per_thread_count([r for r in peers if r["peer"] == "onednn"],
                     "Low-precision activations: nnc against oneDNN's matmul, W 4096×4096 from cache "
                     "(µs median; oneDNN's src given already converted)",
                     [("operands", "---"), ("batch", "---:"), ("oneDNN", "---:"), ("oneDNN implementation", "---"),
                      ("nnc (`--activations`)", "---:"), ("nnc's instruction", "---"), ("nnc / oneDNN", "---:")],
                     onednn_row)
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
