#!/usr/bin/env python3
"""Transformer prefill (seq 128, batch 1, random weights): nnc CLI vs PyTorch vs ONNX Runtime
for the decoders in bench/models/ (GPT-2 small, TinyLlama-1.1B shape), 1 and 2 threads.

Each contender runs in its own processes (TinyLlama's 4.4 GB of f32 weights would not fit
three times over next to the other contenders on the 23 GB host):
  - nnc:    `nnc MODEL.nn --bench --random-weights 1 --threads T --runs C --format json`
            (--profile in the first round): one warm-up run, then C timed runs;
  - torch:  `transformer_bench.py --worker torch`: the same decoder written in torch
            (nn.Embedding, LayerNorm / RMSNorm, q/k/v/o Linear attention with causal
            mask, softmax, GQA and HF rotate_half RoPE, MLP / gated MLP), state-dict names
            = nnc's weight names; torch.inference_mode, torch.set_num_threads(T);
  - ort:    `transformer_bench.py --worker ort`: that torch module exported once with
            torch.onnx.export (opset 17; external data past 2 GB) into --work; one
            InferenceSession, intra_op_num_threads=T, inter_op 1, sequential execution,
            ORT_ENABLE_ALL graph optimisations, CPU provider.
Rounds interleave the contenders (torch, nnc, ort per round), each process times C calls
after one warm-up (two for the small model). Per contender we report the median and the
best single call over all rounds. OPENBLAS_NUM_THREADS / OMP_NUM_THREADS = T for every
process (Debian's torch calls the system OpenBLAS, whose threads torch.set_num_threads
does not set); OPENBLAS_CORETYPE from the environment (Haswell here) is passed through and
reported: with it OpenBLAS runs its AVX2 kernels.

Prints JSON lines {"kind":"transformer",...} (one per model, threads, contender),
{"kind":"transformer_profile",...} (nnc's time per layer kind) and, with --check,
{"kind":"transformer_check",...}; then a markdown table on stderr (bench/report.py makes
the same table from the JSON lines).
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> shape of the decoder (must match bench/models/<name>.nn)
MODELS = {
    "gpt2_small": dict(kind="gpt2", vocab=50257, d=768, layers=12, heads=12, kv=12, ffn=3072, max_pos=1024),
    "tinyllama_1b": dict(kind="llama", vocab=32000, d=2048, layers=22, heads=32, kv=4, ffn=5632, eps=1e-5,
                         theta=10000.0),
}
SEQ = 128


# ---------------------------------------------------------------- torch modules
def build_torch(name, seq=SEQ):
    import torch
    from torch import nn
    import torch.nn.functional as F
    cfg = MODELS[name]

    class Attention(nn.Module):
        def __init__(self, d, heads, kv, bias, rope, theta=10000.0):
            super().__init__()
            self.h, self.kv, self.hd = heads, kv, d // heads
            self.q = nn.Linear(d, d, bias=bias)
            self.k = nn.Linear(d, kv * self.hd, bias=bias)
            self.v = nn.Linear(d, kv * self.hd, bias=bias)
            self.o = nn.Linear(d, d, bias=bias)
            self.rope = rope
            mask = torch.full((seq, seq), float("-inf")).triu(1)
            self.register_buffer("mask", mask, persistent=False)
            if rope:  # HF LlamaRotaryEmbedding (f32)
                inv = 1.0 / (theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))
                ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
                emb = torch.cat((ang, ang), dim=-1)
                self.register_buffer("cos", emb.cos(), persistent=False)
                self.register_buffer("sin", emb.sin(), persistent=False)

        @staticmethod
        def rotate_half(x):
            half = x.shape[-1] // 2
            return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

        def forward(self, x):  # x [seq, d]
            s = x.shape[0]
            q = self.q(x).view(s, self.h, self.hd).transpose(0, 1)   # [h, s, hd]
            k = self.k(x).view(s, self.kv, self.hd).transpose(0, 1)  # [kv, s, hd]
            v = self.v(x).view(s, self.kv, self.hd).transpose(0, 1)
            if self.rope:
                q = q * self.cos + self.rotate_half(q) * self.sin
                k = k * self.cos + self.rotate_half(k) * self.sin
            if self.kv != self.h:  # HF repeat_kv: kv head j serves heads j*g .. j*g+g-1
                g = self.h // self.kv
                k = k[:, None].expand(self.kv, g, s, self.hd).reshape(self.h, s, self.hd)
                v = v[:, None].expand(self.kv, g, s, self.hd).reshape(self.h, s, self.hd)
            scores = torch.matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(self.hd)) + self.mask
            p = torch.softmax(scores, dim=-1)
            return self.o(torch.matmul(p, v).transpose(0, 1).reshape(s, self.h * self.hd))

    class RMSNorm(nn.Module):
        def __init__(self, d, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))
            self.eps = eps

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class MLP(nn.Module):  # down(gelu_tanh(up(x)))
        def __init__(self, d, ffn):
            super().__init__()
            self.up, self.down = nn.Linear(d, ffn), nn.Linear(ffn, d)

        def forward(self, x):
            return self.down(F.gelu(self.up(x), approximate="tanh"))

    class GatedMLP(nn.Module):  # down(silu(gate(x)) * up(x))
        def __init__(self, d, ffn):
            super().__init__()
            self.gate = nn.Linear(d, ffn, bias=False)
            self.up = nn.Linear(d, ffn, bias=False)
            self.down = nn.Linear(ffn, d, bias=False)

        def forward(self, x):
            return self.down(F.silu(self.gate(x)) * self.up(x))

    if cfg["kind"] == "gpt2":
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln_1 = nn.LayerNorm(cfg["d"])
                self.attn = Attention(cfg["d"], cfg["heads"], cfg["kv"], bias=True, rope=False)
                self.ln_2 = nn.LayerNorm(cfg["d"])
                self.mlp = MLP(cfg["d"], cfg["ffn"])

            def forward(self, x):
                x = x + self.attn(self.ln_1(x))
                return x + self.mlp(self.ln_2(x))

        class GPT2(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(cfg["vocab"], cfg["d"])
                self.wpe = nn.Embedding(cfg["max_pos"], cfg["d"])
                self.h = nn.ModuleList(Block() for _ in range(cfg["layers"]))
                self.ln_f = nn.LayerNorm(cfg["d"])
                self.register_buffer("pos", torch.arange(seq), persistent=False)

            def forward(self, tokens):  # [seq] int64 -> [seq, vocab]
                x = self.wte(tokens) + self.wpe(self.pos)
                for b in self.h:
                    x = b(x)
                return F.linear(self.ln_f(x), self.wte.weight)  # head tied to wte

        return GPT2().eval()

    class LBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(cfg["d"], cfg["eps"])
            self.self_attn = Attention(cfg["d"], cfg["heads"], cfg["kv"], bias=False, rope=True, theta=cfg["theta"])
            self.post_attention_layernorm = RMSNorm(cfg["d"], cfg["eps"])
            self.mlp = GatedMLP(cfg["d"], cfg["ffn"])

        def forward(self, x):
            x = x + self.self_attn(self.input_layernorm(x))
            return x + self.mlp(self.post_attention_layernorm(x))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(cfg["vocab"], cfg["d"])
            self.layers = nn.ModuleList(LBlock() for _ in range(cfg["layers"]))
            self.norm = RMSNorm(cfg["d"], cfg["eps"])
            self.lm_head = nn.Linear(cfg["d"], cfg["vocab"], bias=False)

        def forward(self, tokens):
            x = self.embed_tokens(tokens)
            for b in self.layers:
                x = b(x)
            return self.lm_head(self.norm(x))

    return Llama().eval()


def make_tokens(name):
    import torch
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, MODELS[name]["vocab"], (SEQ,), generator=g)


def timed(fn, warmup, calls):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return ts


def worker(a):
    """One contender in this process: prints {"secs": [...], ...} as one JSON line."""
    import torch
    threads = a.threads[0]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tokens = make_tokens(a.model)
    warm = 2 if a.model == "gpt2_small" else 1
    if a.worker == "torch":
        t0 = time.perf_counter()
        with torch.inference_mode():
            net = build_torch(a.model)
        setup = time.perf_counter() - t0

        def call():
            with torch.inference_mode():
                net(tokens)
        info = {"torch": torch.__version__, "openblas_core": openblas_core()}
    elif a.worker == "export":
        net = build_torch(a.model)
        t0 = time.perf_counter()
        with torch.no_grad():
            torch.onnx.export(net, (tokens,), a.onnx, input_names=["tokens"], output_names=["logits"],
                              opset_version=17)
        print(json.dumps({"export_s": time.perf_counter() - t0}), flush=True)
        return
    elif a.worker == "safetensors":  # the torch weights, for nnc --weights (check of the math)
        net = build_torch(a.model)
        sd = {k: v.detach().contiguous().numpy() for k, v in net.state_dict().items()}
        write_safetensors(a.out + ".safetensors", sd)
        import numpy as np
        np.save(a.out + "_tokens.npy", tokens.numpy().astype(np.int32))
        with torch.inference_mode():
            np.save(a.out + "_torch.npy", net(tokens).numpy())
        return
    else:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        t0 = time.perf_counter()
        sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
        setup = time.perf_counter() - t0
        feed = {"tokens": tokens.numpy()}

        def call():
            sess.run(None, feed)
        info = {"onnxruntime": ort.__version__}
    secs = timed(call, warm, a.calls)
    print(json.dumps({"secs": secs, "setup_s": setup, **info}), flush=True)


def openblas_core():
    """The kernel set OpenBLAS picked in this process (OPENBLAS_CORETYPE overrides it), or None."""
    import ctypes
    with open("/proc/self/maps") as f:
        libs = sorted({w for w in f.read().split() if "openblas" in w and w.startswith("/")})
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).openblas_get_corename
            fn.restype = ctypes.c_char_p
            return fn().decode()
        except (OSError, AttributeError):
            pass
    return None


def write_safetensors(path, tensors):
    import numpy as np
    header, off = {}, 0
    for k, v in tensors.items():
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
        off += v.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for v in tensors.values():
            f.write(np.ascontiguousarray(v, dtype="<f4").tobytes())


# ---------------------------------------------------------------- driver
def run_json(cmd, env):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    lines = [l for l in out.splitlines() if l.strip()]
    if lines and lines[0].strip() == "{":  # nnc prints indented JSON
        return json.loads(out)
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", default=os.path.join(HERE, "..", "build", "tools", "nnc", "nnc"))
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (torch, nnc, ort)")
    ap.add_argument("--calls", type=int, default=3, help="timed calls per process and round")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "nnc_tbench"),
                    help="directory for the exported ONNX models (GBs; not in the repository)")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--check", action="store_true", help="gpt2_small: nnc with torch's weights vs torch's logits")
    ap.add_argument("--worker", choices=["torch", "ort", "export", "safetensors"])
    ap.add_argument("--model")
    ap.add_argument("--onnx")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.worker:
        return worker(a)

    os.makedirs(a.work, exist_ok=True)
    me = [sys.executable, os.path.abspath(__file__)]
    coretype = os.environ.get("OPENBLAS_CORETYPE", "")
    info = {"kind": "transformer_info", "openblas_coretype": coretype or None, "seq": SEQ, "batch": 1,
            "rounds": a.rounds, "calls": a.calls, "load_start": open("/proc/loadavg").read().split()[:3]}
    print(json.dumps(info), flush=True)
    rows = [info]  # the table says whether OPENBLAS_CORETYPE forced PyTorch's kernel set
    for name in a.models:
        nn_file = os.path.join(HERE, "models", name + ".nn")
        totals = json.loads(subprocess.run([a.nnc, nn_file, "--format", "json"], check=True, capture_output=True,
                                           text=True).stdout)["totals"]
        flops = 2 * totals["macs"]
        if a.check and name == "gpt2_small":
            check(a, me, name, nn_file)
        os.makedirs(os.path.join(a.work, name), exist_ok=True)  # the model and its external data files
        onnx_path = os.path.join(a.work, name, "model.onnx")
        have_ort = not a.no_ort
        if have_ort and not os.path.exists(onnx_path):
            try:
                r = run_json(me + ["--worker", "export", "--model", name, "--onnx", onnx_path, "--threads", "1"],
                             os.environ.copy())
                print(json.dumps({"kind": "transformer_export", "model": name, **r}), flush=True)
            except subprocess.CalledProcessError as e:
                have_ort = False
                print(json.dumps({"kind": "skip", "what": f"{name} onnxruntime",
                                  "why": (e.stderr or "")[-400:]}), flush=True)
        for T in a.threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(T), OPENBLAS_NUM_THREADS=str(T))
            secs = {"nnc": [], "pytorch": [], "onnxruntime": []}
            nnc_runs, profile = [], None
            for rnd in range(a.rounds):
                tj = run_json(me + ["--worker", "torch", "--model", name, "--threads", str(T),
                                    "--calls", str(a.calls)], env)
                secs["pytorch"] += tj["secs"]
                torch_info = {"torch": tj["torch"], "openblas_core": tj["openblas_core"]}
                cmd = [a.nnc, nn_file, "--bench", "--random-weights", "1", "--threads", str(T),
                       "--runs", str(a.calls), "--format", "json"] + (["--profile"] if rnd == 0 else [])
                j = run_json(cmd, env)
                nnc_runs.append(j)
                profile = profile or j.get("profile")
                # the CLI reports min and median of its runs; keep both per process
                secs["nnc"] += [j["min_us"] / 1e6, j["median_us"] / 1e6]
                if have_ort:
                    secs["onnxruntime"] += run_json(me + ["--worker", "ort", "--model", name, "--onnx", onnx_path,
                                                          "--threads", str(T), "--calls", str(a.calls)], env)["secs"]
            peak = max(j["peak_gflops"] for j in nnc_runs)
            res = {}
            for peer, s in secs.items():
                if not s:
                    continue
                if peer == "nnc":
                    best = min(j["min_us"] for j in nnc_runs) / 1e6
                    med = statistics.median(j["median_us"] for j in nnc_runs) / 1e6
                    n = sum(j["runs"] for j in nnc_runs)
                else:
                    best, med, n = min(s), statistics.median(s), len(s)
                res[peer] = dict(best_ms=best * 1e3, median_ms=med * 1e3, tokens_per_s=SEQ / med,
                                 best_tokens_per_s=SEQ / best, gflops=flops / med / 1e9,
                                 share_of_peak=flops / med / 1e9 / peak, calls=n)
            for peer, r in res.items():
                row = {"kind": "transformer", "model": name, "threads": T, "peer": peer, "seq": SEQ, "batch": 1,
                       "macs": totals["macs"], "attention_macs": totals.get("attention_macs"),
                       "peak_gflops": peak, **r}
                if peer == "pytorch":
                    row.update(torch_info)
                if peer == "nnc":
                    row["compile_ms"] = statistics.median(j["compile_ms"] for j in nnc_runs)
                    row["kernel_row"] = nnc_runs[0].get("kernel_row")
                for other in ("pytorch", "onnxruntime"):
                    if peer == "nnc" and other in res:  # throughput ratios nnc / peer (median; best)
                        row[f"vs_{other}"] = res[other]["median_ms"] / r["median_ms"]
                        row[f"vs_{other}_best"] = res[other]["best_ms"] / r["best_ms"]
                print(json.dumps(row), flush=True)
                rows.append(row)
            if profile:
                print(json.dumps({"kind": "transformer_profile", "model": name, "threads": T,
                                  "profile": profile}), flush=True)
                rows.append({"kind": "transformer_profile", "model": name, "threads": T, "profile": profile})
    print(json.dumps({"kind": "transformer_info", "load_end": open("/proc/loadavg").read().split()[:3]}), flush=True)
    sys.path.insert(0, HERE)
    import report
    print("\n".join(report.transformer_tables(rows)), file=sys.stderr)


def check(a, me, name, nn_file):
    """nnc run with the torch module's own weights against the torch module's logits."""
    import numpy as np
    base = os.path.join(a.work, name + "_check")
    subprocess.run(me + ["--worker", "safetensors", "--model", name, "--out", base, "--threads", "1"], check=True)
    subprocess.run([a.nnc, nn_file, "--run", base + "_tokens.npy", "--weights", base + ".safetensors",
                    "--output", base + "_nnc.npy", "--threads", "1"], check=True, capture_output=True)
    ref, got = np.load(base + "_torch.npy"), np.load(base + "_nnc.npy").reshape(-1, np.load(base + "_torch.npy").shape[-1])
    err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    print(json.dumps({"kind": "transformer_check", "model": name, "max_rel_err_nnc_vs_torch": err}), flush=True)
    for suffix in (".safetensors", "_tokens.npy", "_torch.npy", "_nnc.npy"):
        os.remove(base + suffix)


if __name__ == "__main__":
    main()
