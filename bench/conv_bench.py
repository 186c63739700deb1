#!/usr/bin/env python3
"""Conv nets: ResNet-18 and MobileNet V2 (224×224) — nnc vs PyTorch vs ONNX Runtime, same weights.

torchvision.models.resnet18 / mobilenet_v2 (Debian's python3-torchvision) with their
default random initialisation (seed 0), in eval mode. The state dict is written as a
.safetensors file that nnc loads with bench/models/MODEL.weightmap (batchnorm folded
into the convs at load); the same module is exported to ONNX (opset 17) for ONNX
Runtime. Before timing, nnc's output on two random images is compared with PyTorch's
(max |Δ| / max |torch|). Both run at batch 1 and 8.

The oneDNN convolution chain is PyTorch's own: torch.jit.optimize_for_inference of the
scripted module (frozen, batchnorm folded into the convs, convs and the linear layer
prepacked as oneDNN primitives on oneDNN's blocked MKLDNN tensors from the first conv to
the pooling, activations fused where oneDNN fuses them); its output is checked against
eager PyTorch's. Each contender runs in its own process per round (rounds interleaved
torch -> oneDNN -> nnc -> ORT), one warm-up call then --calls timed calls; best = min, median = median of all
timed calls (nnc: min and median of its --bench runs). GFLOP/s = 2 × MACs of
`nnc bench/models/resnet18.nn --format json` × batch / median time. After the rounds, one
`nnc --bench --profile` run per row gives nnc's rate per conv kind (3×3, 1×1, 7×7,
depthwise 3×3: the kind's MACs over its layers' summed step times) as a share of the
same-run peak, and its slowest layers.

    bench/.venv/bin/python bench/conv_bench.py --threads 1 2 --rounds 2 --calls 5

(bench/.venv: a venv with --system-site-packages holding onnxruntime and onnx.)
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from transformer_bench import run_json, timed, write_safetensors  # noqa: E402


BATCHES = {"resnet18": [1, 8], "mobilenet_v2": [1, 8]}


def build(model, batch):
    import torch, torchvision
    torch.manual_seed(0)
    net = getattr(torchvision.models, model)().eval()
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return net, x


def worker(a):
    import numpy as np
    import torch
    T, B = a.threads[0], a.batches[0]
    torch.set_num_threads(T)
    net, x = build(a.model, B)
    if a.worker == "prepare":  # weights for nnc, the ONNX model, an input and torch's output
        write_safetensors(os.path.join(a.work, a.model + ".safetensors"),
                          {k: v.detach().contiguous().numpy() for k, v in net.state_dict().items()
                           if not k.endswith("num_batches_tracked")})
        np.save(os.path.join(a.work, a.model + "_x.npy"), x.numpy())
        with torch.inference_mode():
            np.save(os.path.join(a.work, a.model + "_torch.npy"), net(x).numpy())
        with torch.no_grad():
            torch.onnx.export(net, (x,), os.path.join(a.work, a.model + ".onnx"), input_names=["x"],
                              output_names=["y"], opset_version=17, dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
        print(json.dumps({"prepared": True}), flush=True)
        return
    if a.worker == "torch":
        def call():
            with torch.inference_mode():
                net(x)
        info = {"torch": torch.__version__, "mkldnn": torch.backends.mkldnn.is_available()}
    elif a.worker == "onednn":
        with torch.no_grad():
            want = net(x)
            chain = torch.jit.optimize_for_inference(torch.jit.script(net))
            got = chain(x)
            got = chain(x)

        def call():
            with torch.no_grad():
                chain(x)
        kinds = {n.kind() for n in chain.graph.nodes()}
        info = {"onednn_max_rel": float((got - want).abs().max() / want.abs().max()),
                "onednn_convs": "prim::mkldnn_convolution" in kinds}
    else:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = T
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(os.path.join(a.work, a.model + ".onnx"), so, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}

        def call():
            sess.run(None, feed)
        info = {"onnxruntime": ort.__version__}
    print(json.dumps({"secs": timed(call, 1, a.calls), **info}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", default=os.path.join(HERE, "..", "build", "tools", "nnc", "nnc"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=list(BATCHES))
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batches", type=int, nargs="+", default=[1])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "nnc_cbench"))
    ap.add_argument("--worker", choices=["prepare", "torch", "onednn", "ort"])
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    import numpy as np
    os.makedirs(a.work, exist_ok=True)
    rows, checks = [], {}
    print(json.dumps({"kind": "conv_info", "load_start": open("/proc/loadavg").read().split()[:3]}), flush=True)
    for model in a.models:
        me = [sys.executable, os.path.abspath(__file__), "--work", a.work, "--model", model]
        nn = os.path.join(HERE, "models", model + ".nn")
        wmap = os.path.join(HERE, "models", model + ".weightmap")
        weights = os.path.join(a.work, model + ".safetensors")
        run_json(me + ["--worker", "prepare", "--threads", "1", "--batches", "2"], os.environ.copy())
        out = os.path.join(a.work, model + "_nnc.npy")
        subprocess.run([a.nnc, nn, "--batch", "2", "--run", os.path.join(a.work, model + "_x.npy"), "--weights",
                        weights, "--weight-map", wmap, "--output", out], check=True, capture_output=True)
        want, got = np.load(os.path.join(a.work, model + "_torch.npy")), np.load(out).reshape(2, -1)
        checks[model] = float(np.abs(got - want).max() / np.abs(want).max())
        report = json.loads(subprocess.run([a.nnc, nn, "--format", "json"], check=True, capture_output=True,
                                           text=True).stdout)
        macs = report["totals"]["macs"]
        kinds = conv_kinds(report)
        print(json.dumps({"kind": "conv_check", "model": model, "max_rel": checks[model], "macs_per_image": macs}),
              flush=True)
        for T in a.threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(T), OPENBLAS_NUM_THREADS=str(T))
            for B in BATCHES[model]:
                secs, nnc_runs = {"pytorch": [], "onednn": [], "onnxruntime": []}, []
                for _ in range(a.rounds):
                    secs["pytorch"] += run_json(me + ["--worker", "torch", "--threads", str(T), "--batches", str(B),
                                                      "--calls", str(a.calls)], env)["secs"]
                    chain = run_json(me + ["--worker", "onednn", "--threads", str(T), "--batches", str(B),
                                           "--calls", str(a.calls)], env)
                    if not chain["onednn_convs"] or chain["onednn_max_rel"] > 1e-4:
                        raise SystemExit(f"the oneDNN chain of {model} is not oneDNN's or differs: {chain}")
                    secs["onednn"] += chain["secs"]
                    nnc_runs.append(run_json([a.nnc, nn, "--batch", str(B), "--bench", "--weights", weights,
                                              "--weight-map", wmap, "--threads", str(T), "--runs", str(a.calls),
                                              "--format", "json"], env))
                    secs["onnxruntime"] += run_json(me + ["--worker", "ort", "--threads", str(T), "--batches",
                                                          str(B), "--calls", str(a.calls)], env)["secs"]
                peak = max(j["peak_gflops"] for j in nnc_runs)
                flops = 2 * macs * B
                res = {"nnc": (min(j["min_us"] for j in nnc_runs) / 1e3,
                               statistics.median(j["median_us"] for j in nnc_runs) / 1e3)}
                for peer, s in secs.items():
                    res[peer] = (min(s) * 1e3, statistics.median(s) * 1e3)
                fastest = min(res[p][1] for p in ("pytorch", "onednn", "onnxruntime"))
                row = {"kind": "conv", "model": model, "threads": T, "batch": B, "peak_gflops": peak,
                       "compile_ms": statistics.median(j["compile_ms"] for j in nnc_runs)}
                for peer, (best, med) in res.items():
                    row[peer] = {"best_ms": best, "median_ms": med, "gflops": flops / (med / 1e3) / 1e9,
                                 "share_of_peak": flops / (med / 1e3) / 1e9 / peak}
                row["nnc_latency_vs_fastest_peer"] = res["nnc"][1] / fastest
                prof = run_json([a.nnc, nn, "--batch", str(B), "--bench", "--profile", "--weights", weights,
                                 "--weight-map", wmap, "--threads", str(T), "--runs", str(max(a.calls, 10)),
                                 "--format", "json"], env)
                row["nnc_layers"] = layer_summary(prof, kinds, peak)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(json.dumps({"kind": "conv_info", "load_end": open("/proc/loadavg").read().split()[:3]}), flush=True)
    print("\n## Conv nets, 224×224: latency ms median (best); nnc's output vs PyTorch's (max |Δ|/max): " +
          ", ".join(f"{m} {c:.1e}" for m, c in checks.items()) + "\n", file=sys.stderr)
    print("| model | threads | batch | nnc | PyTorch | oneDNN chain | ORT | GFLOP/s nnc / PyTorch / oneDNN / ORT | "
          "% of peak nnc | nnc latency / fastest peer |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
          file=sys.stderr)
    for r in rows:
        f = lambda p: f"{r[p]['median_ms']:.1f} ({r[p]['best_ms']:.1f})"
        v = r["nnc_latency_vs_fastest_peer"]
        print(f"| {r['model']} | {r['threads']} | {r['batch']} | {f('nnc')} | {f('pytorch')} | {f('onednn')} | "
              f"{f('onnxruntime')} | {r['nnc']['gflops']:.0f} / {r['pytorch']['gflops']:.0f} / "
              f"{r['onednn']['gflops']:.0f} / {r['onnxruntime']['gflops']:.0f} | "
              f"{100 * r['nnc']['share_of_peak']:.0f}% | {v:.2f} {'✔' if v <= 1.0 else '✘'} |", file=sys.stderr)

    print("\nnnc per conv kind (`--profile`, steps timed one by one: GFLOP/s of the kind's MACs over its "
          "summed time, % of the same-run peak) and its three slowest layers:\n", file=sys.stderr)
    print("| model | threads | batch | conv kinds: GFLOP/s (% of peak) | slowest layers (GFLOP/s) |\n"
          "|---|---:|---:|---|---|", file=sys.stderr)
    for r in rows:
        s = r["nnc_layers"]
        kinds = "; ".join(f"{k} {v['gflops']:.0f} ({100 * v['share_of_peak']:.0f}%)" for k, v in s["kinds"].items())
        slow = ", ".join(f"{l['layer']} {l['gflops']:.0f}" for l in s["slowest"])
        print(f"| {r['model']} | {r['threads']} | {r['batch']} | {kinds} | {slow} |", file=sys.stderr)


def conv_kinds(report):
    """Layer name -> its conv kind ("3×3", "1×1", "depthwise 3×3", ...; strides pooled) from nnc's report."""
    kinds = {}
    for layer in report["layers"]:
        if layer["op"] not in ("conv2d", "depthwise"):
            continue
        out, per_group, kh, kw = next(t["shape"] for t in layer["tensors"] if t["role"] == "weight")
        kinds[layer["name"]] = f"{'depthwise ' if layer['op'] == 'depthwise' or per_group == 1 else ''}{kh}×{kw}"
    return kinds


def layer_summary(prof, kinds, peak):
    """nnc's --profile layers grouped by conv kind (rate of the kind's summed MACs), and the 3 slowest."""
    groups = {}
    for layer in prof["layers"]:
        kind = kinds.get(layer["layer"])
        if kind is None:
            continue
        g = groups.setdefault(kind, {"flop": 0.0, "us": 0.0})
        g["flop"] += layer["gflops"] * layer["us_per_run"] * 1e3
        g["us"] += layer["us_per_run"]
    out = {}
    for kind, g in sorted(groups.items(), key=lambda kv: -kv[1]["us"]):
        rate = g["flop"] / g["us"] / 1e3 if g["us"] > 0 else 0.0
        out[kind] = {"gflops": rate, "share_of_peak": rate / peak, "us_per_run": g["us"]}
    return {"kinds": out, "slowest": prof["layers"][:3]}


if __name__ == "__main__":
    main()
