#!/usr/bin/env python3
"""Text generation (prefill 128 tokens, then decode): nnc --generate vs llama.cpp, same weights.

The TinyLlama-1.1B shape of bench/models/tinyllama_1b.nn (22 layers, d 2048, 32 heads,
4 KV heads, gated MLP 5632, vocab 32000) with random weights (numpy, seeded, PyTorch's
nn.Linear bounds), written once as a .safetensors file for nnc (f32; nnc converts at
load to --dtype) and as GGUF files for llama.cpp (gguf-py: F32, F16, Q8_0, Q4_0; every
2-D tensor in that format, the 1-D norm scales in F32 as llama.cpp keeps them). Format
pairs: f32/F32, f16/F16, i8/Q8_0 (nnc: one scale per output channel; Q8_0: one per 32
weights), i8xi8/Q8_0 (nnc's i8 weights with per-row i8 activations, `--activations i8`:
Q8_0's dot products quantise the activations to 8 bits too), i4/Q4_0 (both: one 16-bit scale
per 32 weights along K: nnc bf16, Q4_0 f16; nnc's i8 and i4 keep f32 activations, which
on a host with vpdpbusd it multiplies as three 8-bit digits: docs/lowering.md, "Digit
products"; NNC_DIGIT_PRODUCTS=off widens the weights instead), i4xi8/Q4_0 (nnc's i4 weights with i8 activations, `--dtype i4
--activations i8`, as Q4_0's dot products take Q8_0 activations).

Each contender runs in its own process per round (rounds interleaved nnc -> llama.cpp),
1 and 2 threads: a 128-token prompt (prefill), then --decode new tokens one at a time
(greedy). nnc packs its weights before the prompt there (NNC_WEIGHTS_WHILE_RUNNING=off;
by default, on fewer threads than cores, the free cores pack them while the prompt runs,
which the time to first token below measures), so its prefill times the kernels alone,
as llama.cpp's does after its load. tokens/s: prefill = 128 / prefill time; decode = (N - 1) / time of the N - 1
steps after the prefill's token. Streaming = GEMM weight bytes × decode steps / decode
time, as a share of nnc's read probe at that thread count (runtime/BandwidthProbe.h,
measured in the same nnc process). llama.cpp: llama-cpp-python built from source in a
venv made with --system-site-packages, with `gguf`. Built with -DGGML_NATIVE=ON it
enables ggml's AMX backend on AMX hosts, whose quantised matmul crashed (SIGSEGV in
ggml_backend_amx_mul_mat) on the guest these figures come from, and on a later AMX guest
died with SIGILL at its first `tilezero` (in ggml_backend_amx_mul_mat, Q8_0), also with
the tile state requested beforehand (arch_prctl ARCH_REQ_XCOMP_PERM granted); so it is
built with every AVX-512 extension on and AMX off (its runtime weight repacking stays on).
GGML_AVX_VNNI is the VEX-encoded AVX-VNNI: ON only where /proc/cpuinfo lists `avx_vnni`
(Zen 5, Intel since Alder Lake / Sapphire Rapids); Zen 4 has AVX512-VNNI but not it, and
there ON makes the Q8_0 and Q4_0 runs die with SIGILL:

    /usr/bin/python3 -m venv --system-site-packages /work/llama-venv
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \\
      -DGGML_BMI2=ON -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON \\
      -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \\
      -DGGML_AMX_BF16=OFF" /work/llama-venv/bin/pip install --no-binary llama-cpp-python \\
      llama-cpp-python==0.3.36 gguf
    /work/llama-venv/bin/python bench/generate_bench.py --threads 1 2 --rounds 2

Time to first token (--ttft, formats --ttft-formats, default f32): nnc --generate 1 as a
whole process (launch to exit, wall clock), and its own ready + prefill, four ways:
cold (NNC_CACHE=off, no weight cache: parse, compile, load and pack, prefill); warm
kernels (the kernel cache filled by an earlier run); warm kernels and weights (also
NNC_WEIGHT_CACHE=on, its entry written by an earlier run: docs/cli.md, "The weight
cache"); and cold kernels over weights packed beforehand (NNC_CACHE=off with the weight
cache's entry: what llama.cpp's cold start is, over a GGUF quantised by an earlier step).
The caches live under --work. llama.cpp's is its ready (the Llama constructor:
mmap of the GGUF) + prefill from the decode rounds. Goals: cold <= 2 s; warm <= prefill
+ 100 ms.

The logits of the two are not compared (llama.cpp's RoPE wants q/k rows permuted from
Hugging Face's layout; these random weights are not), only their speed.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = dict(layers=22, d=2048, heads=32, kv=4, ffn=5632, vocab=32000, eps=1e-5, theta=10000.0)
PROMPT = 128
# "i8xi8" / "i4xi8": nnc's i8 / i4 weights with i8 activations (--activations i8), the like-for-like
# pair for Q8_0, whose dot products quantise the activations to 8 bits too.
# "f32_inplace": f32 weights read where they lie in the mapped file (--weights-in-place), like
# llama.cpp's mmap of its GGUF: nothing packed at load.
PAIRS = [("f32", "F32"), ("f32_inplace", "F32"), ("f16", "F16"), ("i8", "Q8_0"), ("i8xi8", "Q8_0"),
         ("i4", "Q4_0"), ("i4xi8", "Q4_0")]


def nnc_format_args(ours):
    if ours == "f32_inplace":
        return ["--dtype", "f32", "--weights-in-place"]
    if ours.endswith("xi8"):
        return ["--dtype", ours[:2], "--activations", "i8"]
    return ["--dtype", ours]


def tensors():
    """(nnc name, GGUF name, shape, fan_in or None for norm scales of ones), in file order."""
    s = SHAPE
    hd = s["d"] // s["heads"]
    out = [("embed_tokens.weight", "token_embd.weight", (s["vocab"], s["d"]), 1)]
    for i in range(s["layers"]):
        p, g = f"layers.{i}.", f"blk.{i}."
        out += [(p + "input_layernorm.weight", g + "attn_norm.weight", (s["d"],), None),
                (p + "self_attn.q.weight", g + "attn_q.weight", (s["d"], s["d"]), s["d"]),
                (p + "self_attn.k.weight", g + "attn_k.weight", (s["kv"] * hd, s["d"]), s["d"]),
                (p + "self_attn.v.weight", g + "attn_v.weight", (s["kv"] * hd, s["d"]), s["d"]),
                (p + "self_attn.o.weight", g + "attn_output.weight", (s["d"], s["d"]), s["d"]),
                (p + "post_attention_layernorm.weight", g + "ffn_norm.weight", (s["d"],), None),
                (p + "mlp.gate.weight", g + "ffn_gate.weight", (s["ffn"], s["d"]), s["d"]),
                (p + "mlp.up.weight", g + "ffn_up.weight", (s["ffn"], s["d"]), s["d"]),
                (p + "mlp.down.weight", g + "ffn_down.weight", (s["d"], s["ffn"]), s["ffn"])]
    out += [("norm.weight", "output_norm.weight", (s["d"],), None),
            ("lm_head.weight", "output.weight", (s["vocab"], s["d"]), s["d"])]
    return out


def write_weights(work):
    """The safetensors file for nnc; returns its path (kept between runs)."""
    import numpy as np
    path = os.path.join(work, "tinyllama_1b.safetensors")
    if os.path.exists(path):
        return path
    header, off = {}, 0
    for name, _, shape, _ in tensors():
        n = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    rng = np.random.default_rng(0)
    with open(path + ".part", "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for name, _, shape, fan_in in tensors():
            if fan_in is None:
                v = np.ones(shape, dtype=np.float32)
            else:
                bound = np.float32(1.0 / np.sqrt(fan_in))
                v = (rng.random(shape, dtype=np.float32) * 2 - 1) * bound
            f.write(v.astype("<f4").tobytes())
    os.rename(path + ".part", path)
    return path


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]].view("<f4").reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def write_gguf(work, st_path, fmt):
    """The GGUF file of `fmt` (F32, F16, Q8_0, Q4_0) from the safetensors weights."""
    import numpy as np
    import gguf
    path = os.path.join(work, f"tinyllama_1b.{fmt}.gguf")
    if os.path.exists(path):
        return path
    s = SHAPE
    w = gguf.GGUFWriter(path + ".part", "llama")
    w.add_context_length(2048)
    w.add_embedding_length(s["d"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_rope_dimension_count(s["d"] // s["heads"])
    w.add_rope_freq_base(s["theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_file_type({"F32": 0, "F16": 1, "Q8_0": 7, "Q4_0": 2}[fmt])
    # A placeholder SentencePiece vocabulary (ids only matter here).
    w.add_tokenizer_model("llama")
    w.add_token_list([b"<unk>", b"<s>", b"</s>"] + [f"t{i}".encode() for i in range(3, s["vocab"])])
    w.add_token_scores([0.0] * s["vocab"])
    w.add_token_types([2, 3, 3] + [1] * (s["vocab"] - 3))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    qtype = getattr(gguf.GGMLQuantizationType, fmt)
    src = read_safetensors(st_path)
    for name, gname, shape, fan_in in tensors():
        v = np.asarray(src[name])
        if len(shape) == 1 or fmt == "F32":
            w.add_tensor(gname, np.ascontiguousarray(v, dtype=np.float32))
        elif fmt == "F16":
            w.add_tensor(gname, v.astype(np.float16))
        else:
            w.add_tensor(gname, gguf.quants.quantize(v, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.rename(path + ".part", path)
    return path


def prompt_ids():
    import numpy as np
    return (np.random.default_rng(1).integers(3, SHAPE["vocab"], PROMPT)).astype(np.int32)


def llama_worker(a):
    """One llama.cpp process: prints {"prefill_s", "decode_s", ...} as one JSON line."""
    import numpy as np
    from llama_cpp import Llama, __version__
    t0 = time.perf_counter()
    llm = Llama(model_path=a.gguf, n_ctx=PROMPT + a.decode + 8, n_batch=PROMPT, n_ubatch=PROMPT,
                n_threads=a.threads[0], n_threads_batch=a.threads[0], logits_all=False, verbose=False)
    ready = time.perf_counter() - t0
    prompt = [int(t) for t in prompt_ids()]

    vocab = llm.n_vocab()

    def argmax():  # the last evaluated position's logits (logits_all=False keeps only those)
        return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab,))))

    def generate():
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        nxt = argmax()
        t1 = time.perf_counter()
        for _ in range(a.decode - 1):
            llm.eval([nxt])
            nxt = argmax()
        return t1 - t0, time.perf_counter() - t1
    llm.eval(prompt[:8])  # warm-up: first-call allocations
    prefill, decode = generate()
    print(json.dumps({"ready_s": ready, "prefill_s": prefill, "decode_s": decode, "llama_cpp_python": __version__}),
          flush=True)


def gemm_bytes_gguf(path):
    """Bytes of the 2-D tensors but the token embedding (what a decode step streams)."""
    import gguf
    r = gguf.GGUFReader(path)
    return sum(int(t.n_bytes) for t in r.tensors if len(t.shape) == 2 and t.name != "token_embd.weight")


def nnc_ttft(a, nn, st, prompt, fmt, T, env):
    """One nnc process generating one token: wall time, and its own ready and prefill."""
    args = [a.nnc, nn, "--set", f"seq={PROMPT + 8}", "--generate", "1", "--prompt", prompt, "--weights", st,
            *nnc_format_args(fmt), "--threads", str(T), "--format", "json"]
    t0 = time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    wall = time.perf_counter() - t0
    j = json.loads(out)
    return {"wall_s": wall, "ready_s": j["ready_ms"] / 1e3, "prefill_s": j["prefill_ms"] / 1e3,
            "compile_s": j["compile_ms"] / 1e3, "load_s": j["load_ms"] / 1e3,
            "weights_from_cache": j["weights_from_cache"], "while_prompt": j.get("weights_while_prompt", False)}


def ttft(a, nn, st, prompt, llama_rows):
    kernels, weights = os.path.join(a.work, "ttft_kernels"), os.path.join(a.work, "ttft_weights")
    modes = {"cold": {"NNC_CACHE": "off", "NNC_WEIGHT_CACHE": "off"},
             "warm kernels": {"NNC_CACHE": "on", "NNC_CACHE_DIR": kernels, "NNC_WEIGHT_CACHE": "off"},
             "warm kernels + weights": {"NNC_CACHE": "on", "NNC_CACHE_DIR": kernels, "NNC_WEIGHT_CACHE": "on",
                                        "NNC_WEIGHT_CACHE_DIR": weights},
             # llama.cpp's cold start reads weights quantised beforehand (the GGUF); this is nnc's
             # counterpart: kernels compiled, weights from the packed file an earlier run wrote
             "cold kernels, packed weights": {"NNC_CACHE": "off", "NNC_WEIGHT_CACHE": "on",
                                              "NNC_WEIGHT_CACHE_DIR": weights}}
    rows = {}
    for T in a.threads:
        for fmt in a.ttft_formats:
            for mode, extra in modes.items():
                env = dict(os.environ, OMP_NUM_THREADS=str(T), **extra)
                if mode != "cold":
                    nnc_ttft(a, nn, st, prompt, fmt, T, env)  # fills the caches
                for rnd in range(a.rounds):
                    r = {"kind": "ttft", "format": fmt, "threads": T, "mode": mode, "round": rnd,
                         **nnc_ttft(a, nn, st, prompt, fmt, T, env)}
                    print(json.dumps(r), flush=True)
                    rows.setdefault((fmt, T, mode), []).append(r)
    print(f"\n## Time to first token: prompt {PROMPT}, batch 1 (seconds, median over {a.rounds} processes)\n")
    print("nnc: whole process (launch to exit) / its ready + prefill; cold: nothing cached; warm: the kernel cache, "
          "then also the weight cache, filled by an earlier run; cold ready's parts: compiling the prompt's kernels / "
          "loading the weights (†: made on the cores the threads leave free while the prompt ran, so the load "
          "overlaps the prefill); cold kernels, packed weights: compiled, the weights read from the weight cache "
          "as llama.cpp reads its GGUF, quantised beforehand. llama.cpp: ready + prefill of the decode rounds.\n")
    print("| threads | format | nnc cold | cold compile / load | nnc warm kernels | nnc warm kernels + weights "
          "| nnc cold kernels, packed weights | nnc prefill | llama.cpp | cold <= 2 s | cold kernels, packed weights <= 2 s "
          "| warm <= prefill + 0.1 s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    med = statistics.median
    for T in a.threads:
        for fmt in a.ttft_formats:
            cell = {}
            for mode in modes:
                rs = rows[(fmt, T, mode)]
                cell[mode] = (med(r["wall_s"] for r in rs), med(r["ready_s"] + r["prefill_s"] for r in rs))
            prefill = med(r["prefill_s"] for r in rows[(fmt, T, "warm kernels + weights")])
            theirs = dict(PAIRS).get(fmt)
            l = llama_rows.get(("llama.cpp", theirs, T))
            lt = f"{med(r['ready_s'] + r['prefill_s'] for r in l):.2f}" if l else "–"
            show = lambda c: f"{c[0]:.2f} / {c[1]:.2f}"
            warm = cell["warm kernels + weights"][1]
            cold = rows[(fmt, T, "cold")]
            parts = (f"{med(r['compile_s'] for r in cold):.2f} / {med(r['load_s'] for r in cold):.2f}"
                     f"{' †' if all(r['while_prompt'] for r in cold) else ''}")
            packed = cell["cold kernels, packed weights"]
            tick = lambda ok: "✔" if ok else "✘"
            print(f"| {T} | {fmt} | {show(cell['cold'])} | {parts} | {show(cell['warm kernels'])} | "
                  f"{show(cell['warm kernels + weights'])} | {show(packed)} | {prefill:.2f} | {lt} | "
                  f"{tick(cell['cold'][1] <= 2)} | {tick(packed[1] <= 2)} | {tick(warm <= prefill + 0.1)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", default=os.path.join(HERE, "..", "build", "tools", "nnc", "nnc"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--decode", type=int, default=33, help="new tokens (the first comes from the prefill)")
    ap.add_argument("--formats", nargs="+", default=[p[0] for p in PAIRS])
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "nnc_gbench"),
                    help="directory for the weight files (GBs; not in the repository)")
    ap.add_argument("--ttft", action="store_true", help="also time to first token (see above)")
    ap.add_argument("--ttft-formats", nargs="+", default=["f32"])
    ap.add_argument("--no-decode", action="store_true", help="only --ttft")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--gguf")
    a = ap.parse_args()
    if a.worker:
        return llama_worker(a)
    os.makedirs(a.work, exist_ok=True)
    import numpy as np
    t0 = time.perf_counter()
    st = write_weights(a.work)
    pairs = [p for p in PAIRS if p[0] in a.formats]
    ggufs = {g: write_gguf(a.work, st, g) for g in {g for _, g in pairs}}
    print(json.dumps({"kind": "generate_info", "weights_s": time.perf_counter() - t0,
                      "load_start": open("/proc/loadavg").read().split()[:3]}), flush=True)
    prompt = os.path.join(a.work, "prompt.npy")
    np.save(prompt, prompt_ids().reshape(1, PROMPT))
    nn = os.path.join(HERE, "models", "tinyllama_1b.nn")
    rows = {}
    for T in ([] if a.no_decode else a.threads):
        # nnc's weights packed before the prompt, so that its prefill times the kernels
        # alone, as llama.cpp's does after its load (time to first token: --ttft)
        env = dict(os.environ, OMP_NUM_THREADS=str(T), NNC_WEIGHTS_WHILE_RUNNING="off")
        for rnd in range(a.rounds):
            for ours, theirs in pairs:
                out = subprocess.run([a.nnc, nn, "--set", f"seq={PROMPT + a.decode + 8}", "--generate", str(a.decode),
                                      "--prompt", prompt, "--weights", st, *nnc_format_args(ours),
                                      "--threads", str(T), "--format", "json"], check=True, capture_output=True, text=True, env=env).stdout
                j = json.loads(out)
                r = {"kind": "generate", "peer": "nnc", "format": ours, "threads": T, "round": rnd,
                     "ready_s": j["ready_ms"] / 1e3, "prefill_s": j["prefill_ms"] / 1e3,
                     "decode_s": j["decode_ms"] / 1e3, "weight_bytes": j["weight_bytes"],
                     "read_probe_gbps": j["read_probe_gbps"]}
                print(json.dumps(r), flush=True)
                rows.setdefault(("nnc", ours, T), []).append(r)
                out = subprocess.run([sys.executable, __file__, "--worker", "--gguf", ggufs[theirs], "--threads", str(T),
                                      "--decode", str(a.decode)], check=True, capture_output=True, text=True,
                                     env=env).stdout
                j = json.loads(out.splitlines()[-1])
                r = {"kind": "generate", "peer": "llama.cpp", "format": theirs, "threads": T, "round": rnd, **j,
                     "weight_bytes": gemm_bytes_gguf(ggufs[theirs])}
                print(json.dumps(r), flush=True)
                rows.setdefault(("llama.cpp", theirs, T), []).append(r)
    if a.ttft:
        ttft(a, nn, st, prompt, rows)
    print(json.dumps({"kind": "generate_info", "load_end": open("/proc/loadavg").read().split()[:3]}), flush=True)
    if a.no_decode:
        return

    steps = a.decode - 1
    print(f"\n## Text generation: TinyLlama-1.1B shape, prompt {PROMPT}, {a.decode} new tokens, batch 1\n")
    print("tokens/s: median over rounds (best in brackets); streaming = GEMM weight bytes x decode steps / decode "
          "time, as a share of nnc's read probe at that thread count; ratios nnc / llama.cpp, median.\n")
    print("| threads | nnc / llama.cpp | weight GB (nnc / llama.cpp) | prefill tok/s nnc | llama.cpp | decode tok/s "
          "nnc | llama.cpp | streaming nnc / llama.cpp | prefill ratio | decode ratio |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for T in a.threads:
        for ours, theirs in pairs:
            n, l = rows[("nnc", ours, T)], rows[("llama.cpp", theirs, T)]
            probe = statistics.median(r["read_probe_gbps"] for r in n)

            def tps(rs, key, count):
                v = [count / r[key] for r in rs]
                return statistics.median(v), max(v)
            np_, nd = tps(n, "prefill_s", PROMPT), tps(n, "decode_s", steps)
            lp, ld = tps(l, "prefill_s", PROMPT), tps(l, "decode_s", steps)
            ns = n[0]["weight_bytes"] * nd[0] / 1e9 / probe
            ls = l[0]["weight_bytes"] * ld[0] / 1e9 / probe
            ok = lambda x, goal: f"{x:.3f} {'✔' if x >= goal else '✘'}"
            print(f"| {T} | {ours} / {theirs} | {n[0]['weight_bytes'] / 1e9:.2f} / {l[0]['weight_bytes'] / 1e9:.2f} | "
                  f"{np_[0]:.1f} ({np_[1]:.1f}) | {lp[0]:.1f} ({lp[1]:.1f}) | {nd[0]:.2f} ({nd[1]:.2f}) | "
                  f"{ld[0]:.2f} ({ld[1]:.2f}) | {100 * ns:.0f}% / {100 * ls:.0f}% | {ok(np_[0] / lp[0], 1.0)} | "
                  f"{ok(nd[0] / ld[0], 1.2)} |")
    print("\nGoals: decode >= 1.2x llama.cpp and >= 85 % of the read probe in every pair; prefill >= 1.0x.")


if __name__ == "__main__":
    main()
