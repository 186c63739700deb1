#!/usr/bin/env python3
"""End-to-end MLP 784->256->128->10 (bias+ReLU, last layer linear): nnc CLI vs PyTorch
vs ONNX Runtime, interleaved per repetition (torch, nnc, ort, nnc, ...).

With --data DIR (written by `peer_bench --mlp --dump DIR`) PyTorch and ORT get nnc's own
random weights (seed 1, the ones `nnc --random-weights 1` uses) and peer_bench's inputs,
and their outputs are checked against nnc's (max |diff| / max |nnc|).

Every contender is timed per call; we report the min and the median over all calls
(the nnc CLI reports exactly these two for its own run loop; across nnc processes we
keep the min of min_us and the median of the per-process medians).
Prints JSON lines {"kind":"mlp",...}.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time


def timed_calls(fn, min_s):
    for _ in range(20):  # warm-up
        fn()
    ts = []
    t_end = time.perf_counter() + min_s
    while True:
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        ts.append(t1 - t0)
        if t1 >= t_end:
            return ts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-ms", type=float, default=25)
    ap.add_argument("--data", help="directory written by peer_bench --mlp --dump")
    a = ap.parse_args()

    import numpy as np
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 10)).eval()
    if a.data:
        man = json.load(open(os.path.join(a.data, "layers.json")))
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        assert len(linears) == len(man["layers"]), "model shape differs from peer_bench's"
        with torch.no_grad():
            for i, (lin, l) in enumerate(zip(linears, man["layers"])):
                assert (lin.in_features, lin.out_features) == (l["in"], l["out"])
                w = np.fromfile(os.path.join(a.data, f"w{i}.f32"), dtype=np.float32)
                lin.weight.copy_(torch.from_numpy(w.reshape(l["out"], l["in"])))
                if l["bias"]:
                    lin.bias.copy_(torch.from_numpy(np.fromfile(os.path.join(a.data, f"b{i}.f32"), dtype=np.float32)))
    try:
        import onnxruntime as ort
        tmp = tempfile.mkdtemp()
        onnx_path = os.path.join(tmp, "mlp.onnx")
        torch.onnx.export(net, torch.randn(1, 784), onnx_path, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}},
                          opset_version=13)
        ort_err = None
    except Exception as e:  # report, keep going
        ort, ort_err = None, f"{type(e).__name__}: {e}"
        print(json.dumps({"kind": "skip", "what": "mlp onnxruntime", "why": ort_err}), flush=True)

    for T in a.threads:
        torch.set_num_threads(T)
        sess = None
        if ort is not None:
            so = ort.SessionOptions()
            so.intra_op_num_threads = T
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        for B in a.batch:
            x = torch.randn(B, 784)
            ref = None
            if a.data and os.path.exists(os.path.join(a.data, f"input_b{B}.f32")):
                x = torch.from_numpy(np.fromfile(os.path.join(a.data, f"input_b{B}.f32"), dtype=np.float32).reshape(B, 784))
                ref = np.fromfile(os.path.join(a.data, f"nnc_out_b{B}.f32"), dtype=np.float32).reshape(B, -1)
            xn = x.numpy()
            err = {}
            if ref is not None:
                scale = max(float(np.abs(ref).max()), 1e-30)
                with torch.inference_mode():
                    err["pytorch"] = float(np.abs(net(x).numpy() - ref).max()) / scale
                if sess is not None:
                    err["onnxruntime"] = float(np.abs(sess.run(None, {"x": xn})[0] - ref).max()) / scale
            samples = {"pytorch": [], "onnxruntime": []}
            nnc_min, nnc_med, compile_ms = [], [], []

            def run_torch():
                with torch.inference_mode():
                    net(x)

            def run_ort():
                sess.run(None, {"x": xn})

            def run_nnc():
                out = subprocess.run([a.nnc, a.model, "--bench", "--random-weights", "1",
                                      "--format", "json", "--batch", str(B), "--threads", str(T)],
                                     check=True, capture_output=True, text=True).stdout
                j = json.loads(out)
                nnc_min.append(j["min_us"]); nnc_med.append(j["median_us"])
                compile_ms.append(j["compile_ms"])

            peers = [("pytorch", run_torch)] + ([("onnxruntime", run_ort)] if sess else [])
            for _ in range(a.reps):
                for name, fn in peers:  # peer A, nnc, peer B, nnc
                    samples[name] += timed_calls(fn, a.min_ms / 1e3)
                    run_nnc()
            print(json.dumps({"kind": "mlp", "harness": "mlp_bench", "peer": "nnc", "batch": B, "threads": T,
                              "best_us": min(nnc_min), "median_us": statistics.median(nnc_med),
                              "processes": len(nnc_min),
                              "compile_ms_median": statistics.median(compile_ms)}), flush=True)
            for name, _ in peers:
                s = samples[name]
                row = {"kind": "mlp", "harness": "mlp_bench", "peer": name, "batch": B, "threads": T,
                       "best_us": min(s) * 1e6, "median_us": statistics.median(s) * 1e6, "calls": len(s)}
                if name in err:
                    row["max_rel_err_vs_nnc"] = err[name]
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
