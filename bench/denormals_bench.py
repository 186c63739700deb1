#!/usr/bin/env python3
"""Subnormal values: bench/models/faded_mlp_stack.nn (8 gated MLPs 2048 -> 5632 -> 2048,
128 rows, no norms), whose activations fade into the subnormal range by the 5th block,
timed with subnormals flushed to zero and kept: nnc (`--denormals flush|keep`) and
PyTorch (`torch.set_flush_denormal(True|False)`; False is its default) on the same
shapes, PyTorch's default initialisation and the input nnc --bench uses (every element
0.5), interleaved per round. Prints JSON lines {"kind":"denormals",...} and, per block,
PyTorch's largest |activation| (kept), to show where the values go subnormal.

Run with Debian's python (/usr/bin/python3, python3-torch):
  /usr/bin/python3 bench/denormals_bench.py --nnc build/tools/nnc/nnc --threads 1 2 --rounds 2
"""
import argparse, json, os, statistics, subprocess, time

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "faded_mlp_stack.nn")
BLOCKS, D, FFN, ROWS = 8, 2048, 5632, 128


def nnc_times(nnc, mode, threads, runs):
    out = subprocess.run([nnc, MODEL, "--bench", "--random-weights", "1", "--threads", str(threads), "--runs",
                          str(runs), "--format", "json", "--denormals", mode],
                         check=True, capture_output=True, text=True, env={**os.environ, "NNC_CACHE": "off"}).stdout
    j = json.loads(out)
    assert j["denormals"] == mode, j["denormals"]
    return j["min_us"] / 1e3, j["median_us"] / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", required=True)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per process / per PyTorch round")
    a = ap.parse_args()

    import torch
    torch.manual_seed(1)
    blocks = [(torch.nn.Linear(D, FFN, bias=False), torch.nn.Linear(D, FFN, bias=False),
               torch.nn.Linear(FFN, D, bias=False)) for _ in range(BLOCKS)]
    x0 = torch.full((ROWS, D), 0.5)

    def forward(trace=None):
        x = x0
        for gate, up, down in blocks:
            x = down(torch.nn.functional.silu(gate(x)) * up(x))
            if trace is not None:
                trace.append(float(x.abs().max()))
        return x

    with torch.no_grad():
        torch.set_flush_denormal(False)
        scales = []
        forward(scales)
        print(json.dumps({"kind": "denormals_scales", "peer": "pytorch", "max_abs_per_block": scales}), flush=True)
        for threads in a.threads:
            torch.set_num_threads(threads)
            for r in range(a.rounds):
                for mode in ("flush", "keep"):
                    best, median = nnc_times(a.nnc, mode, threads, a.runs)
                    print(json.dumps({"kind": "denormals", "peer": "nnc", "mode": mode, "threads": threads, "round": r,
                                      "best_ms": best, "median_ms": median}), flush=True)
                    torch.set_flush_denormal(mode == "flush")
                    forward()  # warm-up
                    ts = []
                    for _ in range(a.runs):
                        t0 = time.perf_counter()
                        forward()
                        ts.append((time.perf_counter() - t0) * 1e3)
                    torch.set_flush_denormal(False)
                    print(json.dumps({"kind": "denormals", "peer": "pytorch", "mode": mode, "threads": threads,
                                      "round": r, "best_ms": min(ts), "median_ms": statistics.median(ts)}), flush=True)


if __name__ == "__main__":
    main()
