#!/usr/bin/env python3
"""Turns the JSON lines written by peer_bench / mlp_bench.py into markdown tables.
usage: report.py RAW.jsonl... > latest.md"""
import json, sys
from collections import defaultdict

PEERS = ["openblas", "blis", "onednn", "libxsmm", "eigen"]


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    return rows


def main():
    rows = load(sys.argv[1:])
    out = []
    info = [r for r in rows if r["kind"] == "info"]
    if info:
        out.append(f"CPU (LLVM host name): `{info[0]['cpu']}`; GEMM loops: best-of-{info[0]['reps']} "
                   f"and median, each loop >= {info[0]['min_ms']:.0f} ms.\n")

    mach = [r for r in rows if r["kind"] == "machine"]
    peak, bw = {}, {}
    if mach:
        out += ["## Machine limits (measured by peer_bench)", "",
                "| measurement | threads | best | median |", "|---|---:|---:|---:|"]
        for r in mach:
            if r["what"] == "fma_peak":
                peak[r["threads"]] = r["best_gflops"]
                out.append(f"| f32 FMA peak (12 AVX2 FMA chains) | {r['threads']} | "
                           f"{r['best_gflops']:.1f} GFLOP/s | {r['median_gflops']:.1f} GFLOP/s |")
            else:
                if r["what"] == "read_bw_dram":
                    bw[r["threads"]] = r["best_gbs"]
                mb = r["buffer_bytes"] / 2**20
                out.append(f"| {r['what']} ({mb:g} MiB buffer) | {r['threads']} | "
                           f"{r['best_gbs']:.1f} GB/s | {r['median_gbs']:.1f} GB/s |")
        out.append("")

    gemm = [r for r in rows if r["kind"] == "gemm"]
    by = defaultdict(dict)  # (section, threads, M, N, K) -> peer -> row
    order = []
    for r in gemm:
        key = (r["section"], r["threads"], r["M"], r["N"], r["K"])
        if key not in by:
            order.append(key)
        by[key][r["peer"]] = r
    titles = {"square": "Square GEMM M=N=K", "odd": "Odd shapes", "layer": "Layer shapes (M=batch, K=in, N=out)"}
    bad = []
    for section in ["square", "odd", "layer"]:
        for T in sorted({k[1] for k in order}):
            keys = [k for k in order if k[0] == section and k[1] == T]
            if not keys:
                continue
            present = [p for p in PEERS if any(p in by[k] for k in keys)]
            out += [f"## {titles[section]}, {T} thread{'s' if T > 1 else ''} (GFLOP/s, best-of-N; nnc also median)", ""]
            hdr = "| M×N×K | nnc best | nnc median | " + " | ".join(present) + \
                  " | best peer | nnc / best peer | nnc % of FMA peak |"
            out += [hdr, "|---" + "|---:" * (len(present) + 5) + "|"]
            notes = []
            for k in keys:
                d = by[k]
                n = d.get("nnc")
                cells = []
                for p in present:
                    cells.append(f"{d[p]['best_gflops']:.1f}" if p in d else "–")
                    if p in d and d[p]["max_rel_err_vs_nnc"] > 1e-4:
                        bad.append(f"{p} {k[2]}×{k[3]}×{k[4]} T={T}: max rel diff vs nnc {d[p]['max_rel_err_vs_nnc']:.2g}")
                peers = [(d[p]["best_gflops"], p) for p in present if p in d]
                bp = max(peers) if peers else None
                ratio = f"{n['best_gflops'] / bp[0]:.2f}" if n and bp else "–"
                if n and bp and n["best_gflops"] < bp[0]:
                    ratio = f"**{ratio}**"
                share = f"{100 * n['best_gflops'] / peak[T]:.0f}%" if n and T in peak else "–"
                out.append(f"| {k[2]}×{k[3]}×{k[4]} | {n['best_gflops']:.1f} | {n['median_gflops']:.1f} | "
                           + " | ".join(cells) + f" | {bp[1] if bp else '–'} | {ratio} | {share} |")
                if (k[2], k[3], k[4]) == (1, 4096, 4096) and n:
                    wbytes = k[3] * k[4] * 4
                    gbs = wbytes / (n["best_us"] * 1e-6) / 1e9
                    line = f"(1,4096,4096), {T} thread(s): nnc streams the 64 MiB of f32 weights at {gbs:.1f} GB/s"
                    if T in bw:
                        line += f" = {100 * gbs / bw[T]:.0f}% of the measured DRAM read bandwidth ({bw[T]:.1f} GB/s)"
                    for p in present:
                        if p in d:
                            line += f"; {p} {wbytes / (d[p]['best_us'] * 1e-6) / 1e9:.1f} GB/s"
                    notes.append(line + ".")
            out.append("")
            for nline in notes:
                out += [nline, ""]
    if bad:
        out += ["**Result mismatches** (max |C_peer − C_nnc| / max |C_nnc| > 1e-4):", ""] + [f"- {b}" for b in bad] + [""]

    mlp = [r for r in rows if r["kind"] == "mlp"]
    if mlp:
        out += ["## End-to-end MLP 784→256→128→10 (bias+ReLU), latency per call in µs", "",
                "| batch | threads | nnc best | nnc median | PyTorch best | PyTorch median | ORT best | ORT median | best peer / nnc (best) | best peer / nnc (median) |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        cfg = defaultdict(dict)
        for r in mlp:
            cfg[(r["batch"], r["threads"])][r["peer"]] = r
        for (B, T), d in sorted(cfg.items(), key=lambda x: (x[0][1], x[0][0])):
            def c(p, f):
                return f"{d[p][f]:.1f}" if p in d else "–"
            ps = [d[p] for p in ("pytorch", "onnxruntime") if p in d]
            rb = f"{min(p['best_us'] for p in ps) / d['nnc']['best_us']:.2f}" if ps and "nnc" in d else "–"
            rm = f"{min(p['median_us'] for p in ps) / d['nnc']['median_us']:.2f}" if ps and "nnc" in d else "–"
            out.append(f"| {B} | {T} | {c('nnc','best_us')} | {c('nnc','median_us')} | {c('pytorch','best_us')} | "
                       f"{c('pytorch','median_us')} | {c('onnxruntime','best_us')} | {c('onnxruntime','median_us')} | {rb} | {rm} |")
        out += ["", "Ratios > 1: nnc is faster than the best peer.", ""]

    skips = sorted({f"{r.get('why', '')}" for r in rows if r["kind"] == "skip"})
    if skips:
        out += ["## Peers skipped", ""] + [f"- {s}" for s in skips] + [""]
    print("\n".join(out))


if __name__ == "__main__":
    main()
