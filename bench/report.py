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


MLP_PEERS = [("peer_bench", "nnc", "nnc (library)"), ("peer_bench", "onednn_chain", "oneDNN chain"),
             ("peer_bench", "openblas_loop", "OpenBLAS + loop"), ("mlp_bench", "nnc", "nnc (CLI)"),
             ("mlp_bench", "pytorch", "PyTorch"), ("mlp_bench", "onnxruntime", "ONNX Runtime")]


def stream_table(stream, bw):
    """Batch 1 (1,4096,4096) with every call on weights that are in DRAM (rotated copies)."""
    out = ["## Batch 1 (1,4096,4096), weights from DRAM: weight bytes per second", "",
           "Each call uses the next of 8 distinct 64 MiB weight copies, so no call finds its weights "
           "in a cache (the layer table above reuses one copy, part of which stays in L3). \"read probe\" "
           "is the machine-limit read loop over the same copies, interleaved with the contenders: the "
           "DRAM bandwidth of this run (the machine-limit figure was measured minutes earlier, and on "
           "a shared host it varies).", "",
           "| threads | contender | best GB/s | median GB/s | best / read probe (same run) | best / machine-limit DRAM figure |",
           "|---:|---|---:|---:|---:|---:|"]
    probe = {r["threads"]: r["best_weight_gbs"] for r in stream if r["peer"] == "read probe"}
    for r in sorted(stream, key=lambda r: (r["threads"], r["peer"] != "nnc", r["peer"])):
        T = r["threads"]
        same = f"{100 * r['best_weight_gbs'] / probe[T]:.0f}%" if T in probe and r["peer"] != "read probe" else "–"
        share = f"{100 * r['best_weight_gbs'] / bw[T]:.0f}% of {bw[T]:.1f} GB/s" if T in bw else "–"
        out.append(f"| {T} | {r['peer']} | {r['best_weight_gbs']:.1f} | {r['median_weight_gbs']:.1f} | {same} | {share} |")
    return out + [""]


def mlp_tables(mlp, peak, l2bw):
    out = []
    cfg = defaultdict(dict)  # (B, T) -> (harness, peer) -> row
    for r in mlp:
        cfg[(r["batch"], r["threads"])][(r.get("harness", "mlp_bench"), r["peer"])] = r
    keys = sorted(cfg, key=lambda k: (k[0], k[1]))
    present = [p for p in MLP_PEERS if any((p[0], p[1]) in cfg[k] for k in keys)]
    out += ["## End-to-end MLP 784→256→128→10 (bias+ReLU): latency per call, µs, best / median", "",
            "| batch | threads | " + " | ".join(p[2] for p in present) + " |",
            "|---:|---:|" + "---:|" * len(present)]
    bad = []
    for k in keys:
        d = cfg[k]
        cells = []
        for h, p, label in present:
            r = d.get((h, p))
            cells.append(f"{r['best_us']:.1f} / {r['median_us']:.1f}" if r else "–")
            if r and r.get("max_rel_err_vs_nnc", 0) > 1e-4:
                bad.append(f"{label} batch {k[0]} T={k[1]}: max rel diff vs nnc {r['max_rel_err_vs_nnc']:.2g}")
        out.append(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + " |")
    out.append("")
    errs = [r["max_rel_err_vs_nnc"] for r in mlp if "max_rel_err_vs_nnc" in r and r["peer"] != "nnc"]
    if errs:
        out += [f"Outputs agree with nnc's: largest max |y_peer − y_nnc| / max |y_nnc| over all peers and rows "
                f"= {max(errs):.2g} (limit 1e-4), same weights (nnc's `--random-weights 1`) for every contender.", ""]
    if bad:
        out += ["**MLP result mismatches** (> 1e-4):", ""] + [f"- {b}" for b in bad] + [""]

    def ratio(d, a, b, f):  # a / b on field f
        ra, rb = d.get(a), d.get(b)
        return ra[f] / rb[f] if ra and rb else None

    def fmt(best, med, goal=None):
        if best is None:
            return "–"
        s = f"{best:.2f} ({med:.2f})"
        if goal is not None:
            ok_b, ok_m = goal(best), goal(med)
            s += " ✔" if ok_b and ok_m else (" ✔ best only" if ok_b else " ✘")
        return s

    lib, cli = ("peer_bench", "nnc"), ("mlp_bench", "nnc")
    dn, ob = ("peer_bench", "onednn_chain"), ("peer_bench", "openblas_loop")
    pt, ort = ("mlp_bench", "pytorch"), ("mlp_bench", "onnxruntime")
    out += ["## MLP against the issue's goals: ratios best (median)", "",
            "| batch | threads | nnc / oneDNN chain, latency | nnc / ONNX Runtime, latency | nnc / PyTorch, latency "
            "| nnc / OpenBLAS+loop, latency | nnc / oneDNN chain, throughput | nnc / ONNX Runtime, throughput |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in keys:
        d = cfg[k]
        B = k[0]
        def lat(peer, nnc, goal=None):
            return fmt(ratio(d, nnc, peer, "best_us"), ratio(d, nnc, peer, "median_us"), goal)
        def thr(peer, nnc, goal=None):  # same batch: throughput ratio = peer latency / nnc latency
            return fmt(ratio(d, peer, nnc, "best_us"), ratio(d, peer, nnc, "median_us"), goal)
        g1 = B == 1
        out.append(f"| {B} | {k[1]} | {lat(dn, lib, (lambda x: x <= 0.5) if g1 else None)} | "
                   f"{lat(ort, cli, (lambda x: x < 1) if g1 else None)} | "
                   f"{lat(pt, cli, (lambda x: x <= 0.1) if g1 else None)} | {lat(ob, lib)} | "
                   + (f"{thr(dn, lib, lambda x: x >= 1)} | {thr(ort, cli, lambda x: x >= 1)} |" if B > 1 else "– | – |"))
    out += ["",
            "Latency ratios < 1 and throughput ratios > 1: nnc is faster. Goals (✔ met on best and median, "
            "✘ missed): batch 1 — nnc/oneDNN chain ≤ 0.5, nnc below ONNX Runtime (< 1), nnc/PyTorch ≤ 0.1; "
            "batch 64 — throughput ≥ oneDNN chain and ≥ ONNX Runtime (≥ 1). nnc (library) is compared with "
            "the C++ peers it was interleaved with (peer_bench), nnc (CLI) with the Python peers it was "
            "interleaved with (mlp_bench.py).", ""]
    # scale: what the machine allows at batch 1
    for T in sorted({k[1] for k in keys}):
        r = cfg.get((1, T), {}).get(lib)
        if not r or T not in peak:
            continue
        flop = r["best_gflops"] * r["best_us"] * 1e3
        params = flop / 2  # batch 1: one MAC per weight
        line = (f"Batch 1, {T} thread(s), for scale: {flop / 1e3:.0f} kFLOP at the measured FMA peak "
                f"({peak[T]:.0f} GFLOP/s) take {flop / peak[T] / 1e3:.1f} µs")
        if T in l2bw:
            line += (f"; reading the {params * 4 / 1e6:.2f} MB of f32 weights once at the measured L2 read "
                     f"bandwidth ({l2bw[T]:.0f} GB/s) takes {params * 4 / l2bw[T] / 1e3:.1f} µs")
        p = cfg[(1, T)].get(pt)
        if p:
            line += f"; the PyTorch goal (≤ 0.1 × {p['best_us']:.1f} µs) asks for ≤ {0.1 * p['best_us']:.1f} µs"
        out += [line + ".", ""]
    return out


# nnc's profile rows (layer_kind, kernel) -> the breakdown's columns
KIND_GROUPS = [("q/k/v/o projections", lambda k, f: k == "attention" and f == "gemm"),
               ("attention scores (QKᵀ, softmax, AV)", lambda k, f: k == "attention" and f == "attn"),
               ("RoPE", lambda k, f: k == "attention" and f == "rope"),
               ("MLP", lambda k, f: k in ("mlp", "gated_mlp")),
               ("norms", lambda k, f: k in ("layernorm", "rmsnorm")),
               ("head", lambda k, f: k == "dense"),
               ("embeddings", lambda k, f: k in ("embedding", "pos_embedding"))]


def transformer_tables(rows):
    """Transformer prefill rows (bench/transformer_bench.py) -> markdown lines."""
    tr = [r for r in rows if r["kind"] == "transformer"]
    if not tr:
        return []
    cfg = defaultdict(dict)
    for r in tr:
        cfg[(r["model"], r["threads"])][r["peer"]] = r
    info = [r for r in rows if r["kind"] == "transformer_info" and "openblas_coretype" in r]
    cores = sorted({r.get("openblas_core") or "?" for r in tr if r["peer"] == "pytorch"})
    torch_v = sorted({r.get("torch", "?") for r in tr if r["peer"] == "pytorch"})
    out = ["## Transformer prefill: 128 tokens, batch 1, random f32 weights", "",
           "tokens/s = 128 / median time of one prefill (best in brackets); % of peak = model FLOPs (2 × MACs of "
           "`nnc X.nn --format json`) / median time / nnc's measured FMA peak at that thread count. "
           "Ratios are throughput nnc / peer, median (best); goals: ≥ 1.5 × PyTorch, ≥ 1.0 × ONNX Runtime.", ""]
    if torch_v:
        ct = info[0].get("openblas_coretype") if info else None
        out += [f"PyTorch {', '.join(torch_v)} (Debian) runs its GEMMs in the system OpenBLAS, whose kernel set "
                f"here was {', '.join(cores)} ("
                + (f"forced by OPENBLAS_CORETYPE={ct}" if ct else "OPENBLAS_CORETYPE unset: OpenBLAS's own pick for this CPU")
                + "; Haswell = AVX2 kernels, SkylakeX = AVX-512).", ""]
    out += ["| model | threads | nnc tok/s | PyTorch tok/s | ORT tok/s | nnc ms median (best) | PyTorch ms | ORT ms "
            "| % of peak nnc / PyTorch / ORT | nnc / PyTorch | nnc / ORT |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def goal(r, key, g):
        if key not in r:
            return "–"
        m, b = r[key], r[key + "_best"]
        mark = " ✔" if m >= g and b >= g else (" ✔ best only" if b >= g else " ✘")
        return f"{m:.2f} ({b:.2f}){mark}"

    for (model, T), d in sorted(cfg.items()):
        n = d.get("nnc")
        if not n:
            continue
        def tps(p):
            r = d.get(p)
            return f"{r['tokens_per_s']:.0f} ({r['best_tokens_per_s']:.0f})" if r else "–"
        def ms(p):
            r = d.get(p)
            return f"{r['median_ms']:.0f} ({r['best_ms']:.0f})" if r else "–"
        share = " / ".join(f"{100 * d[p]['share_of_peak']:.0f}%" if p in d else "–"
                           for p in ("nnc", "pytorch", "onnxruntime"))
        out.append(f"| {model} | {T} | {tps('nnc')} | {tps('pytorch')} | {tps('onnxruntime')} | {ms('nnc')} | "
                   f"{ms('pytorch')} | {ms('onnxruntime')} | {share} | {goal(n, 'vs_pytorch', 1.5)} | "
                   f"{goal(n, 'vs_onnxruntime', 1.0)} |")
    out.append("")
    best_peak = {}
    for r in tr:
        if r["peer"] == "nnc":
            best_peak[r["threads"]] = max(best_peak.get(r["threads"], 0), round(r["peak_gflops"]))
    peaks = sorted(best_peak.items())
    out += ["FMA peak (nnc --bench PeakProbe, highest over its processes): "
            + ", ".join(f"{p} GFLOP/s at {t} thread{'s' if t > 1 else ''}" for t, p in peaks) + ".", ""]

    prof = [r for r in rows if r["kind"] == "transformer_profile"]
    if prof:
        out += ["### nnc: time per layer kind (share of the profiled run; steps timed one by one)", "",
                "| model | threads | " + " | ".join(g for g, _ in KIND_GROUPS) + " | other |",
                "|---|---:|" + "---:|" * (len(KIND_GROUPS) + 1)]
        for p in sorted(prof, key=lambda r: (r["model"], r["threads"])):
            total = sum(x["us_per_run"] for x in p["profile"]) or 1
            cells, used = [], set()
            for _, match in KIND_GROUPS:
                us = 0
                for i, x in enumerate(p["profile"]):
                    if match(x["layer_kind"], x["kernel"]):
                        us += x["us_per_run"]
                        used.add(i)
                cells.append(f"{us / 1e3:.1f} ms ({100 * us / total:.0f}%)")
            other = sum(x["us_per_run"] for i, x in enumerate(p["profile"]) if i not in used)
            out.append(f"| {p['model']} | {p['threads']} | " + " | ".join(cells) + f" | {other / 1e3:.1f} ms |")
        out += ["", "Goal: attention scores ≤ 15 % of decoder time at seq 128.", ""]
    chk = [r for r in rows if r["kind"] == "transformer_check"]
    for c in chk:
        out += [f"Check: nnc with the PyTorch module's weights, {c['model']} logits, max |Δ| / max |torch| = "
                f"{c['max_rel_err_nnc_vs_torch']:.2g}.", ""]
    return out


def main():
    rows = load(sys.argv[1:])
    out = []
    info = [r for r in rows if r["kind"] == "info"]
    if info:
        out.append(f"CPU (LLVM host name): `{info[0]['cpu']}`; GEMM loops: best-of-{info[0]['reps']} "
                   f"and median, each loop >= {info[0]['min_ms']:.0f} ms.\n")

    mach = [r for r in rows if r["kind"] == "machine"]
    peak, bw, l2bw = {}, {}, {}
    if mach:
        out += ["## Machine limits (measured by peer_bench)", "",
                "| measurement | threads | best | median |", "|---|---:|---:|---:|"]
        for r in mach:
            if r["what"] == "fma_peak":
                # every ISA the host executes has a row; "% of peak" is against the best
                isa = r.get("isa", "avx2+fma")
                peak[r["threads"]] = max(peak.get(r["threads"], 0), r["best_gflops"])
                out.append(f"| f32 FMA peak (12 {isa} FMA chains) | {r['threads']} | "
                           f"{r['best_gflops']:.1f} GFLOP/s | {r['median_gflops']:.1f} GFLOP/s |")
            elif r["what"] == "vpdpbusd_peak":
                out.append(f"| 512-bit vpdpbusd peak (12 chains; digit products: {r['digit_gflops']:.0f} GFLOP/s) | "
                           f"{r['threads']} | {r['best_gops']:.2f} G/s | {r['median_gops']:.2f} G/s |")
            else:
                # one row per load width the host executes; the limit is the best of them
                if r["what"] == "read_bw_dram":
                    bw[r["threads"]] = max(bw.get(r["threads"], 0), r["best_gbs"])
                if r["what"] == "read_bw_l2":
                    l2bw[r["threads"]] = max(l2bw.get(r["threads"], 0), r["best_gbs"])
                mb = r["buffer_bytes"] / 2**20
                out.append(f"| {r['what']} ({mb:g} MiB buffer, {r.get('isa', 'avx2')} loads) | {r['threads']} | "
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
                  " | best peer | nnc / best peer | nnc % of best FMA peak |"
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
            if T > 1 and any("libxsmm" in by[k] for k in order if k[0] == section):
                notes.append("LIBXSMM: not run at 2 threads (only its single-threaded kernel dispatch is used "
                             "here; see the 1-thread table).")
            elif "libxsmm" in present:
                notes.append("LIBXSMM: – = not run (only M ≤ 64, N ≤ 128, K ≤ 128, and only at 1 thread).")
            few = [f"{k[2]}×{k[3]}×{k[4]} ({min(r['iters'] for r in by[k].values())} call"
                   f"{'s' if min(r['iters'] for r in by[k].values()) > 1 else ''})"
                   for k in keys if min(r["iters"] for r in by[k].values()) < 5]
            if few:
                notes.append("Fewer than 5 calls per timed loop (a loop is ≥ min-ms, so here best-of-N is close to "
                             "the best of N single calls; N is not reduced), least over the contenders: "
                             + ", ".join(few) + ".")
            for nline in notes:
                out += [nline, ""]
    if bad:
        out += ["**Result mismatches** (max |C_peer − C_nnc| / max |C_nnc| > 1e-4):", ""] + [f"- {b}" for b in bad] + [""]

    stream = [r for r in rows if r["kind"] == "stream"]
    if stream:
        out += stream_table(stream, bw)
    mlp = [r for r in rows if r["kind"] == "mlp"]
    if mlp:
        out += mlp_tables(mlp, peak, l2bw)

    out += transformer_tables(rows)

    skips = sorted({f"{r.get('why', '')}" for r in rows if r["kind"] == "skip"})
    if skips:
        out += ["## Peers skipped", ""] + [f"- {s}" for s in skips] + [""]
    print("\n".join(out))


if __name__ == "__main__":
    main()
