// Shared by the GEMM tests: a naive double-precision reference of
//   C = act(A · W^T + bias) + residual
// and a checker that runs a compiled kernel on 1 and on 2 threads, and under forced
// splits along M and N (Gemm::runSplit), and compares.
//
// Tolerance (per element), stated once here:
//   |C - ref| <= 1e-5 * (sum_k |a_k w_k| + |bias| + |residual|) + 2e-6 * |ref|
// The first term bounds f32 accumulation (K ≤ 1000: random-walk error ~sqrt(K)·6e-8)
// pushed through an activation with |act'| ≤ 1.13; the second covers the activation's
// own relative error (≤ 1e-6, tested separately in ElementwiseTest).
// Low-precision weights (spec.weightType): the reference multiplies by the values the
// kernel stores (codegen::storedWeightValues: each weight rounded to f16/bf16, or q · s),
// so the same tolerance holds: only the f32 arithmetic differs. Likewise low-precision
// activations (spec.activationType): codegen::storedActivationValues of A.
// The checker also fills C with NaN first (catches unwritten elements), keeps canaries
// past the end of C (catches masked-store overruns) and requires the 1-thread result,
// the 2-thread one and those of splits 2×1, 1×2, 3×2, 5×3 (row parts × panel parts)
// to be bit-identical.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <limits>
#include <random>
#include <vector>

#include "runtime/ThreadPool.h"
#include "compiler/codegen/DotGemmEmitter.h"
#include "runtime/jit/Gemm.h"

namespace nnc::testing {

inline double referenceActivation(codegen::Activation act, double x) {
  using codegen::Activation;
  switch (act) {
  case Activation::None: return x;
  case Activation::Relu: return x < 0 ? 0 : x;
  case Activation::Relu6: return x < 0 ? 0 : x > 6 ? 6 : x;
  case Activation::Sigmoid: return 1 / (1 + std::exp(-x));
  case Activation::Tanh: return std::tanh(x);
  case Activation::Gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  case Activation::GeluTanh:
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case Activation::Silu: return x / (1 + std::exp(-x));
  }
  return x;
}

inline runtime::JitEngine& hostJit() {
  static std::unique_ptr<runtime::JitEngine> jit = runtime::JitEngine::create();
  return *jit;
}

inline runtime::ThreadPool& twoThreads() {
  static runtime::ThreadPool pool(2);
  return pool;
}

// n values uniform in [-1, 1) from rng.
inline std::vector<float> randomVector(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = uni(rng);
  return v;
}

// Compiles spec on `jit`, runs it on random data (seeded by the shape) with 1 and 2
// threads, and reports the first bad element. Returns false on any failure.
// fillAW(A, W), if given, overwrites the random A (M × K) and W (N × K).
inline bool checkGemm(runtime::JitEngine& jit, const codegen::GemmSpec& s, const codegen::PackOptions& quant = {},
                      const std::function<void(std::vector<float>& A, std::vector<float>& W)>& fillAW = nullptr) {
  std::mt19937 rng(uint32_t(s.M * 1000003 + s.N * 1009 + s.K));
  auto randomVector = [&](int64_t n) { return testing::randomVector(rng, n); };
  std::vector<float> A = randomVector(s.M * s.K), W = randomVector(s.N * s.K);
  std::vector<float> bias = randomVector(s.N), residual = randomVector(s.M * s.N);
  if (fillAW) fillAW(A, W);

  runtime::Gemm gemm(jit, s);
  runtime::PackedWeights packed = gemm.pack(W.data(), quant);
  W = codegen::storedWeightValues(codegen::gemmPanelLayout(s, jit.microKernel()), W.data(), quant);
  // Low-precision activations: the kernel multiplies rounded / quantised A.
  const std::vector<float> rawA = A;
  A = codegen::storedActivationValues(s.activationType, A.data(), s.M, s.K);
  constexpr int kCanaries = 64;
  const float canary = 12345.0f;
  // Run 0: 1 thread; run 1: 2 threads with run()'s own split; then forced splits.
  const runtime::GemmSplit forced[] = {{2, 1}, {1, 2}, {3, 2}, {5, 3}};
  constexpr int kRuns = 2 + int(std::size(forced));
  auto describe = [&](int run) {
    if (run < 2) return "threads=" + std::to_string(run + 1);
    return "split=" + std::to_string(forced[run - 2].rowParts) + "x" +
           std::to_string(forced[run - 2].panelParts);
  };
  const int64_t outN = s.gated ? s.N / 2 : s.N; // gated: C holds act(gate) · up
  std::vector<float> first;
  for (int run = 0; run < kRuns; ++run) {
    std::vector<float> C(size_t(s.M * outN + kCanaries), std::numeric_limits<float>::quiet_NaN());
    std::fill(C.end() - kCanaries, C.end(), canary);
    const float* biasPtr = s.bias ? bias.data() : nullptr;
    const float* resPtr = s.residual ? residual.data() : nullptr;
    if (run < 2)
      gemm.run(rawA.data(), packed, biasPtr, resPtr, C.data(), run == 1 ? &twoThreads() : nullptr);
    else
      gemm.runSplit(rawA.data(), packed, biasPtr, resPtr, C.data(), &twoThreads(), forced[run - 2]);
    for (int i = 0; i < kCanaries; ++i)
      if (C[size_t(s.M * outN + i)] != canary) {
        ADD_FAILURE() << s.key() << " " << describe(run) << ": wrote past the end of C";
        return false;
      }
    if (run > 0) {
      if (std::memcmp(first.data(), C.data(), first.size() * sizeof(float)) != 0) {
        ADD_FAILURE() << s.key() << ": " << describe(run) << " differs from 1 thread";
        return false;
      }
      continue;
    }
    auto dotOf = [&](int64_t m, int64_t n, double& mag) {
      double dot = 0;
      mag = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        double p = double(A[size_t(m * s.K + k)]) * double(W[size_t(n * s.K + k)]);
        dot += p;
        mag += std::fabs(p);
      }
      return dot;
    };
    if (s.gated) { // act(gate) · up: each factor's accumulation error scaled by the other
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t j = 0; j < outN; ++j) {
          double magGate, magUp;
          double gateSum = dotOf(m, j, magGate), up = dotOf(m, outN + j, magUp);
          if (s.bias) { // [gate; up] biases
            gateSum += bias[size_t(j)], magGate += std::fabs(bias[size_t(j)]);
            up += bias[size_t(outN + j)], magUp += std::fabs(bias[size_t(outN + j)]);
          }
          const double gate = referenceActivation(s.act, gateSum);
          const double ref = gate * up, got = C[size_t(m * outN + j)];
          const double tol = 1.2e-5 * (magGate * std::fabs(up) + magUp * std::fabs(gate)) + 2e-6 * std::fabs(ref);
          if (!(std::fabs(got - ref) <= tol)) {
            ADD_FAILURE() << s.key() << " " << describe(run) << " at (m=" << m << ", j=" << j << "): got " << got
                          << ", want " << ref << " (tolerance " << tol << ")";
            return false;
          }
        }
      first = std::move(C);
      continue;
    }
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        double mag;
        double dot = dotOf(m, n, mag);
        if (s.bias) dot += bias[size_t(n)], mag += std::fabs(bias[size_t(n)]);
        double ref = referenceActivation(s.act, dot);
        if (s.residual) ref += residual[size_t(m * s.N + n)], mag += std::fabs(residual[size_t(m * s.N + n)]);
        ref = referenceActivation(s.actAfterResidual, ref);
        double got = C[size_t(m * s.N + n)];
        double tol = 1e-5 * mag + 2e-6 * std::fabs(ref);
        if (!(std::fabs(got - ref) <= tol)) {
          ADD_FAILURE() << s.key() << " " << describe(run) << " at (m=" << m << ", n=" << n
                        << "): got " << got << ", want " << ref << " (tolerance " << tol << ")";
          return false;
        }
      }
    first = std::move(C);
  }
  return true;
}

} // namespace nnc::testing
