// The machine's peak f32 arithmetic, measured: what `nnc --bench` divides by for its
// "share of peak".
//
// Method (the BLIS definition of peak, measured instead of computed from a data
// sheet): every thread runs 12 independent chains of fused multiply-adds on full
// vectors — enough chains to cover FMA latency × FMA ports of current x86 cores — on
// registers only, for a fixed count; peak = 2 × lanes × FMAs over the wall time from
// a common start to the last thread's end, best of many ~2 ms rounds.
// The widest instructions the CPU offers are used: AVX-512F, else AVX2 + FMA, else SSE
// with separate multiplies and adds (each a flop per lane). With no more threads than
// CPUs, thread i is pinned to the i-th allowed CPU for the probe (the caller gets its
// CPU set back).
// It takes about `budgetMillis` (default 50 ms).
#pragma once
#include <string>

namespace nnc::runtime {

struct PeakFlops {
  double gflops = 0; // f32 GFLOP/s over all threads
  int threads = 1;
  std::string isa;   // "avx512f", "avx2+fma" or "sse"
  double millis = 0; // time the probe took
};

PeakFlops measurePeakFlops(int threads, double budgetMillis = 50);

} // namespace nnc::runtime
