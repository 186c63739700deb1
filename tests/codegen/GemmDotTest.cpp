// GEMMs with low-precision activations (DotGemmEmitter.h): bf16 × bf16 through
// vdpbf16ps and per-row i8 × i8 (per channel and per tensor) through vpdpbusd, on every
// engine this host can build them for (the AVX-512 row with AVX512_BF16 / AVX512_VNNI,
// the AVX2 row with AVX-VNNI; the host's own engine uses AMX tiles where it has them,
// the explicit AVX-512 engine never), against GemmReference.h's reference over the values the
// kernel multiplies (storedActivationValues, storedWeightValues): the same tight
// tolerance as f32, since only the f32 summation differs. Shapes: M = 1..3 (accumulator
// sets), row-block and panel tails, K not a multiple of the dot width, primes, several
// row chunks, every epilogue, the tile kernels' 16-row blocks and K steps; then rows of zeros and the error on a row without the
// instructions. Skipped where the host has none of them.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <tuple>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

struct DotEngine {
  std::string name;
  runtime::JitEngine* jit;
};

// Engines whose rows can build dot kernels for `activations`: the host's,
// an AVX-512 one and an AVX-VNNI one where the host has them, and the AVX2 row without
// AVX-VNNI (byte pairs, DotGemmEmitter.h: bytePairProducts) on any AVX2 host whose own
// row is not that already.
std::vector<DotEngine> dotEngines(DType activations) {
  static std::vector<std::unique_ptr<runtime::JitEngine>> engines = [] {
    std::vector<std::unique_ptr<runtime::JitEngine>> out;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
      out.push_back(runtime::JitEngine::create(runtime::JitTarget(
          "x86-64", std::string("+avx,+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512dq,+avx512vl") +
                        (__builtin_cpu_supports("avx512bf16") ? ",+avx512bf16" : "") +
                        (__builtin_cpu_supports("avx512vnni") ? ",+avx512vnni" : ""),
          "avx512")));
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avxvnni"))
      out.push_back(runtime::JitEngine::create(runtime::JitTarget("x86-64", "+avx,+avx2,+fma,+f16c,+avxvnni", "avx2")));
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        !codegen::bytePairProducts(hostJit().features(), hostJit().microKernel()))
      out.push_back(runtime::JitEngine::create(runtime::JitTarget("x86-64", "+avx,+avx2,+fma,+f16c", "avx2")));
    return out;
  }();
  std::vector<DotEngine> out;
  auto add = [&](const std::string& name, runtime::JitEngine* jit) {
    if (codegen::missingDotInstructions(activations, jit->features(), jit->microKernel()).empty())
      out.push_back({name + (codegen::bytePairProducts(jit->features(), jit->microKernel()) ? " (byte pairs)" : ""), jit});
  };
  add(std::string("host ") + hostJit().microKernel().family, &hostJit());
  for (auto& e : engines) add(e->microKernel().family, e.get());
  return out;
}

GemmSpec dot(GemmSpec s, DType activations) {
  s.weightType = s.activationType = activations;
  return s;
}

void everyEngine(DType activations, bool perTensor) {
  const std::vector<DotEngine> engines = dotEngines(activations);
  if (engines.empty()) GTEST_SKIP() << "no kernel row here has the dot-product instructions";
  codegen::PackOptions quant;
  quant.perTensor = perTensor;
  for (const DotEngine& e : engines) {
    SCOPED_TRACE(e.name);
    const int64_t MR = e.jit->microKernel().MR, NR = e.jit->microKernel().NR;
    const int64_t W = e.jit->microKernel().vectorFloats;
    std::vector<GemmSpec> specs;
    for (int64_t m : {int64_t(1), int64_t(2), int64_t(3), MR + 1})
      for (int64_t n : {int64_t(1), W + 3, NR, 2 * NR + 7})
        specs.push_back(GemmSpec{m, n, m == 1 ? 97 : 33, (m + n) % 2 == 0});
    for (int64_t k : {1, 2, 3, 5, 6, 7, 8, 17})
      specs.push_back(GemmSpec{MR - 1, NR + 1, k, true});
    specs.push_back(GemmSpec{2 * MR + 5, 3 * NR + 17, 64, true, Activation::Relu, true});
    specs.push_back(GemmSpec{MR - 1, NR - 1, 31, true, Activation::Gelu});
    specs.push_back(GemmSpec{3, NR, 1000, false, Activation::Silu, true});
    specs.push_back(GemmSpec{MR + 3, NR + 5, 40, true, Activation::None, true});
    specs.back().actAfterResidual = Activation::Relu; // a relu after a residual add
    // Several row chunks (kMaxConvertedBytes of converted rows), the last one short.
    specs.push_back(GemmSpec{MR * (codegen::kMaxConvertedBytes / (MR * 4096)) + 7, 2 * NR + 1, 4096, true});
    // AMX tiles (DotGemmEmitter.h): 16-row blocks in pairs, a lone block, the M tail;
    // whole tile steps of K (32 bf16 / 64 i8) and a remainder of K.
    for (int64_t m : {16, 32, 33, 47, 53, 64})
      for (int64_t k : {32, 64, 97, 784})
        specs.push_back(GemmSpec{m, m % 2 ? NR + 9 : 2 * NR, k, m % 3 == 0, Activation::None, m == 47});
    specs.push_back(GemmSpec{35, 17 * NR + 5, 96, true, Activation::Relu}); // 18 panels: two groups of tile calls
    std::mt19937 rng(uint32_t(40 + int(activations)));
    std::uniform_int_distribution<int64_t> dim(1, 67);
    for (int i = 0; i < 4; ++i) specs.push_back(GemmSpec{dim(rng), dim(rng), dim(rng), bool(i % 2)});
    for (const GemmSpec& s : specs) ASSERT_TRUE(checkGemm(*e.jit, dot(s, activations), quant));
  }
}

// i4 weights under i8 activations (DotGemmEmitter.h, "i8 × i4"): MR/2-row blocks (with
// byte pairs beyond 4 rows, blocks of 4 loading each panel's nibbles split once, and
// splitting them again where K is too long for that buffer), scale groups of 16, 32 and
// 64 k steps, K inside one group, on a group's edge and past it (a shorter last group),
// K not a multiple of 4 (zero-padded dot steps), M = 1..3 (accumulator sets), row-block
// tails of 1 and 2 rows, panel tails, narrow last panels (one vector), every epilogue,
// several row chunks.
TEST(GemmDot, I4WeightsUnderI8ActivationsEveryEngine) {
  const std::vector<DotEngine> engines = dotEngines(DType::I8);
  if (engines.empty()) GTEST_SKIP() << "no kernel row here has vpdpbusd or byte pairs";
  for (const DotEngine& e : engines) {
    SCOPED_TRACE(e.name);
    const int64_t MR = e.jit->microKernel().MR, NR = e.jit->microKernel().NR;
    const int64_t W = e.jit->microKernel().vectorFloats;
    std::vector<GemmSpec> specs;
    for (int64_t group : {16, 32, 64})
      for (int64_t m : {int64_t(1), int64_t(2), int64_t(3), MR / 2 + 1, int64_t(5), int64_t(6), MR + 5})
        for (int64_t k : {int64_t(5), group, group + 4, 3 * group + 7, int64_t(257)}) {
          GemmSpec s{m, (m + k) % 3 == 0 ? W - 3 : (m + k) % 3 == 1 ? NR : 2 * NR + W + 1, k, (m + k) % 2 == 0};
          s.quantGroup = group;
          specs.push_back(s);
        }
    GemmSpec epilogue{MR + 3, NR + 5, 96, true, Activation::Gelu, true};
    epilogue.actAfterResidual = Activation::Relu;
    specs.push_back(epilogue);
    specs.push_back(GemmSpec{3, NR, 1000, false, Activation::Silu, true});
    specs.push_back(GemmSpec{MR * (codegen::kMaxConvertedBytes / (MR * 4096)) + 7, 2 * NR + 1, 4096, true});
    specs.push_back(GemmSpec{9, NR + 3, 16417, true}); // a panel's split nibbles beyond the buffer
    // AMX tiles (usesTiles): 16-row blocks in pairs, a lone one, the M tail; groups of one
    // tile step (16-64 k) and of two (128); K past a whole group, which the vector kernels
    // take; 18 panels, two groups of tile calls.
    for (int64_t group : {16, 48, 128})
      for (int64_t m : {16, 33, 64})
        for (int64_t k : {3 * group, 3 * group + 16}) {
          GemmSpec s{m, m == 33 ? NR + 9 : 2 * NR, k, m != 64, Activation::None, m == 33};
          s.quantGroup = group;
          specs.push_back(s);
        }
    specs.push_back(GemmSpec{35, 17 * NR + 5, 96, true, Activation::Relu});
    for (GemmSpec s : specs) {
      s.weightType = DType::I4;
      s.activationType = DType::I8;
      if (s.quantGroup == 0) s.quantGroup = 32;
      ASSERT_TRUE(checkGemm(*e.jit, s));
    }
  }
}

TEST(GemmDot, Bf16ActivationsEveryEngine) {
  ASSERT_NO_FATAL_FAILURE(everyEngine(DType::BF16, false));
}
TEST(GemmDot, I8ActivationsPerChannelEveryEngine) {
  ASSERT_NO_FATAL_FAILURE(everyEngine(DType::I8, false));
}
TEST(GemmDot, I8ActivationsPerTensorEveryEngine) {
  ASSERT_NO_FATAL_FAILURE(everyEngine(DType::I8, true));
}

// GemmSpec::gated under low-precision activations (gated_mlp's gate and up as one GEMM
// under --activations): the epilogue brings each factor's sums to f32 as a plain GEMM's
// epilogue does (DotGemmEmitter.cpp, scaledSums) before act(gate) · up. bf16 × bf16,
// i8 × i8 and i4 under i8 (groups of 16 and 32), on every engine with the instructions:
// one row (paired panels where the engine pairs them), row-block tails, several
// panels, K tails, with and without the bias [b_gate; b_up]; against the reference. Under i8 activations the sums are exact in
// i32 and each channel's f32 steps the same, so the result must also have the bits of
// the lowering the gated GEMM replaced: a gate and an up GEMM, then the GatedProduct
// step (bf16's f32 sums run in accumulator sets that follow the block's shape).
TEST(GemmDot, GatedEpilogueUnderLowPrecisionActivations) {
  bool ran = false;
  std::mt19937 rng(13);
  for (auto [activations, weights, group] : {std::tuple{DType::BF16, DType::BF16, int64_t(0)},
                                             {DType::I8, DType::I8, int64_t(0)},
                                             {DType::I8, DType::I4, int64_t(16)},
                                             {DType::I8, DType::I4, int64_t(32)}})
    for (const DotEngine& e : dotEngines(activations)) {
      ran = true;
      SCOPED_TRACE(e.name + ": " + std::string(dtypeName(activations)) + " x " + std::string(dtypeName(weights)) +
                   " weights, group " + std::to_string(group));
      const int64_t MR = e.jit->microKernel().MR, NR = e.jit->microKernel().NR;
      for (auto [m, n, k] : {std::array<int64_t, 3>{1, 4 * NR, 96}, {1, 64, 160}, {2, 64, 37}, {3, 96, 64},
                             {MR + 1, (5 * NR + 31) / 32 * 32, 99}, {40, 64, 256}}) {
        const Activation act = m == 3 ? Activation::GeluTanh : Activation::Silu;
        GemmSpec s{m, n, group > 0 ? (k + group - 1) / group * group : k, m % 2 == 1, act}; // odd M: a bias
        s.gated = true, s.activationType = activations, s.weightType = weights, s.quantGroup = group;
        ASSERT_TRUE(checkGemm(*e.jit, s));
        if (activations != DType::I8) continue;
        // The same weights as a gate and an up GEMM (rows [0, N/2) and [N/2, N)), then the product.
        const int64_t half = s.N / 2;
        const std::vector<float> A = randomVector(rng, s.M * s.K), W = randomVector(rng, s.N * s.K),
                                 bias = randomVector(rng, s.N);
        const float* b = s.bias ? bias.data() : nullptr;
        std::vector<float> fused(size_t(s.M * half)), gate(fused.size()), up(fused.size()), product(fused.size());
        runtime::Gemm both(*e.jit, s);
        both.run(A.data(), both.pack(W.data()), b, nullptr, fused.data());
        GemmSpec plain = s;
        plain.gated = false, plain.N = half, plain.act = Activation::None;
        runtime::Gemm one(*e.jit, plain);
        one.run(A.data(), one.pack(W.data()), b, nullptr, gate.data());
        one.run(A.data(), one.pack(W.data() + half * s.K), b ? b + half : nullptr, nullptr, up.data());
        runtime::Elementwise(*e.jit, codegen::ElementwiseSpec{codegen::ElementwiseSpec::GatedProduct, act, s.M, half})
            .run(gate.data(), up.data(), product.data());
        EXPECT_EQ(std::memcmp(fused.data(), product.data(), fused.size() * sizeof(float)), 0) << s.key();
      }
    }
  if (!ran) GTEST_SKIP() << "no kernel row here has vdpbf16ps or vpdpbusd (or byte pairs)";
}

// On a host with AMX (and the OS's leave to use it), the host engine's bf16 / i8 GEMMs
// (i8 weights; i4 ones beyond decode rows) run on tiles: 16-row blocks (the grids above
// then cover them); elsewhere this says so.
TEST(GemmDot, HostWithAmxUsesTiles) {
  const codegen::CpuFeatures f = hostJit().features();
  if (!f.amxBf16 && !f.amxInt8) GTEST_SKIP() << "this host (or its OS) gives no AMX tiles: the vector kernels run";
  for (DType a : {DType::BF16, DType::I8}) {
    if (!codegen::usesTiles(a, a, f, hostJit().microKernel())) continue;
    runtime::Gemm gemm(hostJit(), dot(GemmSpec{40, 64, 64}, a));
    EXPECT_EQ(gemm.plan().rowBlockRows, codegen::kTileRows) << dtypeName(a);
    EXPECT_EQ(gemm.plan().rowBlocks, 3) << dtypeName(a);
    // Decode rows: on tiles, but over weights beyond L2 on vectors (which stream them
    // faster), and those give the reference's results.
    const int64_t l2 = codegen::hostL2BytesOr(1024 * 1024);
    for (int64_t K : {int64_t(64), (l2 / 4096 + 64) / 64 * 64}) {
      const GemmSpec decode = dot(GemmSpec{codegen::kDecodePrefetchRows, 4096, K}, a);
      const bool inL2 = bytesFor(4096 * K, a) <= l2;
      EXPECT_EQ(codegen::planGemm(decode, hostJit().microKernel(), f).rowBlockRows == codegen::kTileRows, inL2)
          << dtypeName(a) << " decode rows, K " << K;
      if (!inL2) {
        EXPECT_TRUE(checkGemm(hostJit(), decode)) << dtypeName(a) << " decode rows, K " << K;
      }
    }
  }
  // i4 weights under i8 activations: where whole tile steps cover the scale groups, and
  // not for decode rows.
  if (!codegen::usesTiles(DType::I8, DType::I4, f, hostJit().microKernel())) return;
  for (int64_t group : {32, 64, 128, 80})
    for (int64_t m : {codegen::kDecodePrefetchRows, int64_t(40)}) {
      GemmSpec s{m, 64, 4 * group};
      s.activationType = DType::I8, s.weightType = DType::I4, s.quantGroup = group;
      runtime::Gemm gemm(hostJit(), s);
      EXPECT_EQ(gemm.plan().rowBlockRows == codegen::kTileRows, group != 80 && m == 40) << "group " << group << ", M " << m;
    }
  // Digit products (f32 activations): over i8 weights, and over i4 (K from
  // kMinDigitI4K) with the same groups, from kDigitTileMinRows rows.
  if (!hostJit().microKernel().digitProducts) return;
  for (int64_t m : {codegen::kDigitTileMinRows - 1, codegen::kDigitTileMinRows}) {
    GemmSpec s{m, 64, 256};
    s.weightType = DType::I8;
    ASSERT_TRUE(codegen::usesDigitProducts(s, hostJit().microKernel()));
    runtime::Gemm gemm(hostJit(), s);
    EXPECT_EQ(gemm.plan().rowBlockRows == codegen::kTileRows, m >= codegen::kDigitTileMinRows) << "i8 weights, M " << m;
  }
  for (int64_t group : {32, 64, 128, 80})
    for (int64_t m : {codegen::kDigitTileMinRows - 1, codegen::kDigitTileMinRows, int64_t(40)}) {
      GemmSpec s{m, codegen::kMinDigitI4N, 64 * group};
      s.weightType = DType::I4, s.quantGroup = group;
      ASSERT_TRUE(codegen::usesDigitProducts(s, hostJit().microKernel()));
      runtime::Gemm gemm(hostJit(), s);
      EXPECT_EQ(gemm.plan().rowBlockRows == codegen::kTileRows, group != 80 && m >= codegen::kDigitTileMinRows)
          << "digit products, group " << group << ", M " << m;
    }
}

// A tile block's converted rows lie in the kernel's scratch, not on its stack: tiles
// however long K is (digit products 3 bytes a k step, i8 1, bf16 2; once they stopped at
// 7 MiB of stack), on a row with AMX whatever this host has (the predicate, not the kernels).
TEST(GemmDot, TilesHoweverLongKIs) {
  codegen::MicroKernelShape avx512 = *codegen::findMicroKernel("avx512");
  avx512.digitProducts = true;
  codegen::CpuFeatures amx;
  amx.avx = amx.avx2 = amx.fma = amx.avx512f = amx.f16c = true;
  amx.avx512bf16 = amx.avx512vnni = amx.amxBf16 = amx.amxInt8 = true;
  for (auto [activations, weights] :
       {std::pair{DType::F32, DType::I8}, {DType::I8, DType::I8}, {DType::BF16, DType::BF16}}) {
    SCOPED_TRACE(std::string(dtypeName(activations)) + " activations");
    for (int64_t K : {int64_t(4096), int64_t(152917), int64_t(152918), int64_t(1) << 20}) {
      GemmSpec spec{64, 64, K};
      spec.activationType = activations, spec.weightType = weights;
      EXPECT_TRUE(codegen::usesTiles(spec, amx, avx512)) << "K = " << K;
    }
  }
}

// A layer of plain i8 weights with K = 200,000 at 16 rows: its converted rows (digit
// products: 3 bytes a k step, 9.6 MB for a tile block of 16 rows) go to the kernel's
// scratch, whose size the plan says, while the kernel's frames stay small (on the stack
// they overflowed a kernel thread's 8 MiB); every split gives the same bits.
TEST(GemmDot, AVeryLongKKeepsItsRowsOffTheStack) {
  GemmSpec spec{16, 40, 200000};
  spec.weightType = DType::I8;
  runtime::Gemm gemm(hostJit(), spec);
  if (gemm.plan().dot) {
    EXPECT_GE(gemm.plan().scratchBytes, (gemm.plan().tiles ? 16 : 1) * 3 * spec.K);
  }
  EXPECT_LT(hostJit().stackBytes(spec), size_t(64) << 10);
  std::mt19937 rng(5);
  const std::vector<float> A = testing::randomVector(rng, spec.M * spec.K), W = testing::randomVector(rng, spec.N * spec.K);
  const runtime::PackedWeights packed = gemm.pack(W.data());
  std::vector<float> one(size_t(spec.M * spec.N)), split(one.size(), -1.0f);
  gemm.run(A.data(), packed, nullptr, nullptr, one.data());
  runtime::ThreadPool pool(2);
  gemm.runSplit(A.data(), packed, nullptr, nullptr, split.data(), &pool, {2, 2});
  EXPECT_EQ(one, split);
  for (float v : one) ASSERT_TRUE(std::isfinite(v));
}

// Integer products on AMX tiles whose decode rows keep the vector kernels: i8 and i4
// weights under f32 activations (digit products), i4 and i8 under i8 ones, against the reference over 16-row blocks, M tails, K past the
// whole tile steps (i8 weights) or groups of one tile step (16, 48) and of two (128),
// 17 panels (two tile calls), bias, residual and a gated epilogue; and each row gets the
// bits the vector kernel gives it as a decode row (M <= 3), so that a decoder's prompt
// and its steps agree (the i32 sums are exact, the f32 steps after them the same).
TEST(GemmDot, IntegerTilesGiveTheBitsOfDecodeRows) {
  if (!codegen::usesTiles(DType::I8, DType::I4, hostJit().features(), hostJit().microKernel()))
    GTEST_SKIP() << "this host (or its OS) gives no AMX-INT8 tiles: the vector kernels run";
  const int64_t NR = hostJit().microKernel().NR;
  std::mt19937 rng(11);
  for (auto [activations, weights] :
       {std::pair{DType::F32, DType::I4}, {DType::I8, DType::I4}, {DType::F32, DType::I8}, {DType::I8, DType::I8}})
    for (int64_t group : weights == DType::I4 ? std::vector<int64_t>{16, 48, 128} : std::vector<int64_t>{0}) {
      SCOPED_TRACE(std::string(dtypeName(activations)) + " activations, " + std::string(dtypeName(weights)) +
                   " weights, group " + std::to_string(group));
      // i8 × i8: weights beyond L2, which the decode rows multiply on vectors (usesTiles).
      const int64_t l2 = codegen::hostL2BytesOr(1024 * 1024);
      const int64_t K = group > 0                  ? (codegen::kMinDigitI4K + group - 1) / group * group
                        : activations == DType::I8 ? (l2 / (17 * NR) + 64) / 64 * 64
                                                   : 1000;
      auto typed = [&](GemmSpec s) {
        s.weightType = weights, s.activationType = activations, s.quantGroup = group;
        return s;
      };
      // Digit products take weights of kMinDigitI8N / kMinDigitI4N outputs or more.
      const int64_t wide = activations == DType::I8 ? 0
                           : weights == DType::I4   ? codegen::kMinDigitI4N
                                                    : codegen::kMinDigitI8N;
      std::vector<GemmSpec> specs;
      for (int64_t m : {codegen::kDigitTileMinRows, int64_t(16), int64_t(33), int64_t(64)})
        specs.push_back(typed(GemmSpec{m, wide + (m == 33 ? NR + 9 : 2 * NR), K, m != 64, Activation::Relu, m == 33}));
      specs.push_back(typed(GemmSpec{19, std::max(17 * NR + 5, wide + 5), K, true, Activation::None, true}));
      // Rows of 4 KiB (padded by a line: DotGemmBuilder); digit products: two chunks of converted rows.
      specs.push_back(typed(GemmSpec{100, wide + NR + 3, group > 0 ? 4096 / group * group : 4096, true}));
      GemmSpec gated = typed(GemmSpec{21, wide + 4 * NR, K, false, Activation::Silu});
      gated.gated = true;
      specs.push_back(gated);
      for (const GemmSpec& s : specs) {
        ASSERT_TRUE(codegen::usesTiles(s, hostJit().features(), hostJit().microKernel())) << s.key();
        ASSERT_TRUE(checkGemm(hostJit(), s));
        if (s.M != 19 && s.M != 21) continue;
        // Rows 0-2 and the tail's 16-18 as decode rows.
        const int64_t outN = s.gated ? s.N / 2 : s.N;
        const std::vector<float> A = testing::randomVector(rng, s.M * K), W = testing::randomVector(rng, s.N * K),
                                 bias = testing::randomVector(rng, s.N), residual = testing::randomVector(rng, s.M * outN);
        runtime::Gemm whole(hostJit(), s);
        const runtime::PackedWeights packed = whole.pack(W.data());
        std::vector<float> all(size_t(s.M * outN));
        whole.run(A.data(), packed, s.bias ? bias.data() : nullptr, s.residual ? residual.data() : nullptr, all.data());
        for (int64_t row0 : {int64_t(0), int64_t(16)})
          for (int64_t m = 1; m <= 3; ++m) {
            GemmSpec few = s;
            few.M = m;
            ASSERT_FALSE(codegen::usesTiles(few, hostJit().features(), hostJit().microKernel()));
            runtime::Gemm decode(hostJit(), few);
            std::vector<float> C(size_t(m * outN));
            decode.run(A.data() + row0 * K, decode.pack(W.data()), s.bias ? bias.data() : nullptr,
                       s.residual ? residual.data() + row0 * outN : nullptr, C.data());
            EXPECT_EQ(std::memcmp(C.data(), all.data() + row0 * outN, C.size() * sizeof(float)), 0)
                << s.key() << ": rows " << row0 << ".." << row0 + m - 1;
          }
      }
    }
}

// A row of zeros quantises with scale 0: its outputs are the bias, exactly; a row
// holding a NaN activation gives NaN in every output, as f32 does (its q is 0, and the
// row's scale NaN: it gave the finite outputs of the row with a 0 there).
TEST(GemmDot, I8RowOfZerosGivesTheBiasAndARowWithANaNGivesNaN) {
  const std::vector<DotEngine> engines = dotEngines(DType::I8);
  if (engines.empty()) GTEST_SKIP() << "no kernel row here has vpdpbusd";
  const int64_t M = 4, N = 40, K = 21;
  std::vector<float> A(static_cast<size_t>(M * K), 0.0f), W(static_cast<size_t>(N * K));
  std::vector<float> bias(static_cast<size_t>(N)), C(static_cast<size_t>(M * N));
  for (int64_t k = 0; k < K; ++k) A[size_t(2 * K + k)] = A[size_t(3 * K + k)] = float(k) - 10.0f; // rows 2, 3 not zero
  A[size_t(2 * K + 3)] = NAN;
  for (size_t i = 0; i < W.size(); ++i) W[i] = float(int(i % 7) - 3) / 3.0f;
  for (size_t n = 0; n < bias.size(); ++n) bias[n] = float(n) * 0.25f;
  for (const DotEngine& e : engines) {
    SCOPED_TRACE(e.name);
    runtime::Gemm gemm(*e.jit, dot(GemmSpec{M, N, K, true}, DType::I8));
    runtime::PackedWeights packed = gemm.pack(W.data());
    gemm.run(A.data(), packed, bias.data(), nullptr, C.data());
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t n = 0; n < N; ++n) EXPECT_EQ(C[size_t(m * N + n)], bias[size_t(n)]) << m << ", " << n;
    const std::vector<float> a = codegen::storedActivationValues(DType::I8, A.data(), M, K);
    const std::vector<float> w = codegen::storedWeightValues(gemm.layout(), W.data());
    for (int64_t n = 0; n < N; ++n) {
      EXPECT_TRUE(std::isnan(C[size_t(2 * N + n)])) << "row with a NaN, channel " << n << ": " << C[size_t(2 * N + n)];
      double ref = bias[size_t(n)], mag = std::fabs(ref);
      for (int64_t k = 0; k < K; ++k)
        ref += double(a[size_t(3 * K + k)]) * w[size_t(n * K + k)], mag += std::fabs(a[size_t(3 * K + k)] * w[size_t(n * K + k)]);
      EXPECT_NEAR(C[size_t(3 * N + n)], ref, 1e-5 * mag) << "the row after it, channel " << n;
    }
  }
}

// Digit products (f32 activations over i8 or i4 weights): a row holding a NaN gives NaN
// in every output, as f32 does (its digits quantise the NaN to 0, and its row's — i4:
// its group's — scale is NaN), also where the NaN's group is otherwise zeros; the row
// without it, the same GEMM's, stays finite. (A NaN gave the finite bits of the row with
// a 0 there.) On a byte-pair row (AVX2 without AVX-VNNI) only i4 weights are digit products.
TEST(GemmDot, DigitProductsGiveNaNForARowWithANaN) {
  if (!hostJit().microKernel().digitProducts) GTEST_SKIP() << "the host's row has no digit products";
  const int64_t N = codegen::kMinDigitI4N + 8, K = codegen::kMinDigitI4K;
  for (DType weights : {DType::I8, DType::I4}) {
    SCOPED_TRACE(dtypeName(weights));
    GemmSpec s{2, N, K, true};
    s.weightType = weights, s.quantGroup = weights == DType::I4 ? 32 : 0;
    if (!codegen::usesDigitProducts(s, hostJit().microKernel())) {
      ASSERT_NE(weights, DType::I4) << "i4 weights with groups of 32 at K = kMinDigitI4K are digit products";
      std::printf("%s weights not checked: not digit products on the host's %s row\n",
                  std::string(dtypeName(weights)).c_str(), hostJit().microKernel().family);
      continue;
    }
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<float> A(size_t(2 * K)), W(size_t(N * K)), bias(static_cast<size_t>(N)), C(size_t(2 * N));
    for (auto* v : {&W, &bias})
      for (float& x : *v) x = uni(rng);
    for (int64_t k = 0; k < K; ++k) A[size_t(k)] = A[size_t(K + k)] = k / 32 == 1 ? 0.0f : uni(rng);
    for (int64_t k : {int64_t(40), int64_t(5), K - 1}) { // 40: in the group of zeros; then two more
      A[size_t(K + k)] = NAN;
      runtime::Gemm gemm(hostJit(), s);
      runtime::PackedWeights packed = gemm.pack(W.data());
      gemm.run(A.data(), packed, bias.data(), nullptr, C.data());
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_TRUE(std::isfinite(C[size_t(n)])) << n;
        ASSERT_TRUE(std::isnan(C[size_t(N + n)])) << "NaN at k " << k << ", channel " << n << ": " << C[size_t(N + n)];
      }
    }
  }
}

// Decode rows of i8 activations read their full panels two at a time (pairsFullPanels):
// over byte pairs up to three rows, over vpdpbusd on a row of 32 registers one. Each row
// must get the bits it gets inside a many-row GEMM, which reads them one at a time (the
// i32 sums are exact); N covers two pairs, a lone full panel and a tail panel, for i8
// and i4 weights, with bias, residual and an activation.
TEST(GemmDot, PairedPanelsGiveTheBitsOfOnePanelAtATime) {
  std::vector<DotEngine> engines;
  for (const DotEngine& e : dotEngines(DType::I8))
    if (codegen::bytePairProducts(e.jit->features(), e.jit->microKernel()) || e.jit->microKernel().registers >= 32)
      engines.push_back(e);
  if (engines.empty()) GTEST_SKIP() << "no byte-pair row (AVX2) nor AVX-512 row with AVX512_VNNI here";
  std::mt19937 rng(5);
  auto randomVector = [&](int64_t count) { return testing::randomVector(rng, count); };
  for (const DotEngine& e : engines)
    for (DType weights : {DType::I8, DType::I4}) {
      SCOPED_TRACE(e.name + " " + std::string(dtypeName(weights)) + " weights");
      const int64_t pairedRows = codegen::bytePairProducts(e.jit->features(), e.jit->microKernel()) ? 3 : 1;
      const int64_t N = 5 * e.jit->microKernel().NR + 3, K = 200, many = 8;
      auto spec = [&](int64_t M) {
        GemmSpec s{M, N, K, true, Activation::Relu, true};
        s.weightType = weights, s.activationType = DType::I8, s.quantGroup = weights == DType::I4 ? 32 : 0;
        return s;
      };
      ASSERT_FALSE(codegen::pairsFullPanels(spec(many), e.jit->features(), e.jit->microKernel()));
      const std::vector<float> A = randomVector(many * K), W = randomVector(N * K), bias = randomVector(N),
                               residual = randomVector(many * N);
      std::vector<float> all(size_t(many * N));
      runtime::Gemm whole(*e.jit, spec(many));
      whole.run(A.data(), whole.pack(W.data()), bias.data(), residual.data(), all.data());
      for (int64_t m = 1; m <= 3; ++m) {
        ASSERT_EQ(codegen::pairsFullPanels(spec(m), e.jit->features(), e.jit->microKernel()), m <= pairedRows)
            << m << " rows";
        std::vector<float> few(size_t(m * N));
        runtime::Gemm decode(*e.jit, spec(m));
        decode.run(A.data(), decode.pack(W.data()), bias.data(), residual.data(), few.data());
        EXPECT_EQ(std::memcmp(few.data(), all.data(), few.size() * sizeof(float)), 0) << m << " rows";
      }
    }
}

// One-row digit products on a row of 32 registers read their full panels two at a time
// (pairsFullPanels: two weight streams, one set of accumulators, the gated epilogue per
// panel of the pair), or one at a time where the host measured that faster
// (MicroKernelShape::pairsOneRowPanels off: an engine built so, below). The i32 sums are
// exact and a channel's f32 steps the same, so the row must get the bits it gets inside
// a two-row GEMM, which reads one panel at a time: i8 and i4 weights; N of pairs, a lone
// full panel and a tail (bias, residual and an activation), and a gated GEMM of as many
// full panels (five, or more to reach kMinDigitI4N).
TEST(GemmDot, PairedDigitPanelsGiveTheBitsOfOnePanelAtATime) {
  std::vector<DotEngine> engines;
  for (const DotEngine& e : dotEngines(DType::I8))
    if (e.jit->microKernel().digitProducts && e.jit->microKernel().registers >= 32) engines.push_back(e);
  if (engines.empty()) GTEST_SKIP() << "no row here with digit products and 32 registers (AVX-512 with AVX512_VNNI)";
  runtime::JitTarget single("x86-64", "+avx,+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vnni", "avx512");
  single.pairsOneRowPanels = false;
  static const std::unique_ptr<runtime::JitEngine> singleJit = runtime::JitEngine::create(single);
  engines.push_back({"avx512, one panel at a time", singleJit.get()});
  std::mt19937 rng(7);
  for (const DotEngine& e : engines)
    for (DType weights : {DType::I8, DType::I4})
      for (bool gated : {false, true}) {
        SCOPED_TRACE(e.name + " " + std::string(dtypeName(weights)) + (gated ? " gated" : ""));
        // At least five panels and kMinDigitI4N outputs (usesDigitProducts).
        const int64_t NR = e.jit->microKernel().NR, panels = std::max<int64_t>(5, codegen::kMinDigitI4N / NR + 1);
        const int64_t N = gated ? panels * NR : panels * NR + 3, K = codegen::kMinDigitI4K + 96;
        auto spec = [&](int64_t M) {
          GemmSpec s{M, N, K, !gated, gated ? Activation::Silu : Activation::Relu, !gated};
          s.weightType = weights, s.quantGroup = weights == DType::I4 ? 32 : 0, s.gated = gated;
          return s;
        };
        ASSERT_TRUE(codegen::usesDigitProducts(spec(1), e.jit->microKernel()));
        ASSERT_EQ(codegen::pairsFullPanels(spec(1), e.jit->features(), e.jit->microKernel()),
                  e.jit->microKernel().pairsOneRowPanels);
        ASSERT_FALSE(codegen::pairsFullPanels(spec(2), e.jit->features(), e.jit->microKernel()));
        const int64_t outN = gated ? N / 2 : N;
        const std::vector<float> A = testing::randomVector(rng, 2 * K), W = testing::randomVector(rng, N * K),
                                 bias = testing::randomVector(rng, N), residual = testing::randomVector(rng, 2 * outN);
        const float* b = gated ? nullptr : bias.data();
        const float* r = gated ? nullptr : residual.data();
        std::vector<float> two(size_t(2 * outN)), one(static_cast<size_t>(outN));
        runtime::Gemm rows2(*e.jit, spec(2));
        rows2.run(A.data(), rows2.pack(W.data()), b, r, two.data());
        runtime::Gemm row1(*e.jit, spec(1));
        row1.run(A.data(), row1.pack(W.data()), b, r, one.data());
        EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
      }
}

// Over vpdpbusd, a block of few rows multiplies the high nibbles of i4 weights as the
// whole bytes, lo + 16·hi, and recovers their sums at each group's end
// (DotGemmEmitter.cpp: highNibblesAsWholeBytes); larger blocks shift and mask. The i32
// sums are exact either way, so decode rows (M = 1..3) must get the bits of the same
// rows inside a 9-row GEMM, for i4 × i8 and digit products, groups of 16 and 32, with
// bias, residual and an activation, on every vpdpbusd row here. First, on the 16-lane
// row's IR (built on any host), that the two GEMMs take different paths: no 32-bit
// shift of the weights in the one-row kernel, shifts in the 9-row one.
TEST(GemmDot, HighNibblesAsWholeBytesGiveTheBitsOfSplitNibbles) {
  auto spec = [](int64_t M, int64_t N, DType activations, int64_t group) {
    // Digit products (f32 activations) take weights of kMinDigitI4N outputs or more.
    GemmSpec s{M, N + (activations == DType::F32 ? codegen::kMinDigitI4N : 0), 2 * codegen::kMinDigitI4K + 3 * group,
               true, Activation::Relu, true};
    s.weightType = DType::I4, s.activationType = activations, s.quantGroup = group;
    return s;
  };
  const std::unique_ptr<runtime::JitEngine> zmm = runtime::JitEngine::create(
      runtime::JitTarget("x86-64", "+avx,+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vnni", "avx512"));
  auto shifts = [&](const GemmSpec& s) {
    const std::string ir = zmm->emit(s, runtime::JitEngine::EmitForm::LLVM);
    int count = 0;
    for (size_t at = ir.find("lshr <16 x i32>"); at != std::string::npos; at = ir.find("lshr <16 x i32>", at + 1)) ++count;
    return count;
  };
  for (DType activations : {DType::F32, DType::I8}) {
    SCOPED_TRACE(std::string(dtypeName(activations)) + " activations, 16-lane IR");
    const int64_t group = activations == DType::F32 ? 32 : 16, NR = zmm->microKernel().NR;
    EXPECT_EQ(shifts(spec(1, 2 * NR, activations, group)), 0);
    EXPECT_GT(shifts(spec(9, 2 * NR, activations, group)), 0);
  }
  std::vector<DotEngine> engines;
  for (const DotEngine& e : dotEngines(DType::I8))
    if (!codegen::bytePairProducts(e.jit->features(), e.jit->microKernel())) engines.push_back(e);
  if (engines.empty()) GTEST_SKIP() << "no vpdpbusd row here (AVX512_VNNI or AVX-VNNI)";
  std::mt19937 rng(9);
  for (const DotEngine& e : engines)
    for (DType activations : {DType::F32, DType::I8})
      for (int64_t group : {16, 32}) {
        SCOPED_TRACE(e.name + ", " + std::string(dtypeName(activations)) + " activations, group " + std::to_string(group));
        const int64_t outputs = 3 * e.jit->microKernel().NR + 5, many = 9; // spec() adds digit products' outputs
        const int64_t N = spec(1, outputs, activations, group).N, K = spec(1, outputs, activations, group).K;
        const std::vector<float> A = testing::randomVector(rng, many * K), W = testing::randomVector(rng, N * K),
                                 bias = testing::randomVector(rng, N), residual = testing::randomVector(rng, many * N);
        std::vector<float> all(size_t(many * N));
        runtime::Gemm whole(*e.jit, spec(many, outputs, activations, group));
        whole.run(A.data(), whole.pack(W.data()), bias.data(), residual.data(), all.data());
        for (int64_t m = 1; m <= 3; ++m) {
          std::vector<float> few(size_t(m * N));
          runtime::Gemm decode(*e.jit, spec(m, outputs, activations, group));
          decode.run(A.data(), decode.pack(W.data()), bias.data(), residual.data(), few.data());
          EXPECT_EQ(std::memcmp(few.data(), all.data(), few.size() * sizeof(float)), 0) << m << " rows";
        }
      }
}

// Byte pairs sum kPairSpanSteps (8) dot steps' vpmaddubsw pairs in i16 before widening
// them (DotGemmEmitter.cpp): at the largest products these sums reach within 7 % of
// 32767, so a longer span, or a larger operand, saturates and these outputs go wrong.
// Every i4 weight is its group's largest (the nibble 15); under i8 activations every
// activation its row's (q_a = ±127); under f32 activations (digit products) all but one
// activation a group have digits d0 = d1 = −128 (X = 127 · 65536 − 32896 or −126 · 65536
// − 32896, exact: the group's largest is ±127/128, so X = a · 2^23).
TEST(GemmDot, BytePairSumsAtTheirLimitsDoNotSaturate) {
  std::vector<DotEngine> engines;
  for (const DotEngine& e : dotEngines(DType::I8))
    if (codegen::bytePairProducts(e.jit->features(), e.jit->microKernel())) engines.push_back(e);
  if (engines.empty()) GTEST_SKIP() << "no byte-pair row here (the AVX2 row without AVX-VNNI needs AVX2)";
  for (const DotEngine& e : engines)
    for (DType activations : {DType::I8, DType::F32})
      for (int64_t group : {32, 64})
        for (int64_t M = 1; M <= 3; ++M) {
          SCOPED_TRACE(e.name + ", " + std::string(dtypeName(activations)) + " activations, group " + std::to_string(group));
          const bool digits = activations == DType::F32; // from kMinDigitI4K steps and kMinDigitI4N outputs
          GemmSpec s{M, 2 * e.jit->microKernel().NR + e.jit->microKernel().vectorFloats + (digits ? codegen::kMinDigitI4N : 0),
                     digits ? codegen::kMinDigitI4K : 4 * group, true};
          s.weightType = DType::I4, s.activationType = activations, s.quantGroup = group;
          if (activations == DType::F32) {
            ASSERT_TRUE(codegen::usesDigitProducts(s, e.jit->microKernel()));
          }
          ASSERT_TRUE(checkGemm(*e.jit, s, {}, [&](std::vector<float>& A, std::vector<float>& W) {
            std::fill(W.begin(), W.end(), 1.0f);
            for (int64_t m = 0; m < M; ++m)
              for (int64_t k = 0; k < s.K; ++k) {
                const bool negative = m % 2 == 1, groupMax = activations == DType::I8 || k % group == 0;
                const int32_t X = groupMax ? 127 * 65536 : negative ? 126 * 65536 + 32896 : 127 * 65536 - 32896;
                A[size_t(m * s.K + k)] = (negative ? -1.0f : 1.0f) * float(X) / float(1 << 23);
              }
          }));
        }
}

// A row without the instructions refuses the spec, naming what is missing: bf16 on the
// AVX2 row, i8 on the AVX row (no 256-bit integer vectors; the AVX2 row has byte pairs).
TEST(GemmDot, RowWithoutTheInstructionsIsAnError) {
  auto avx2 = runtime::JitEngine::create(runtime::JitTarget("x86-64", "+avx,+avx2,+fma", "avx2"));
  auto avx = runtime::JitEngine::create(runtime::JitTarget("x86-64", "+avx", "avx"));
  EXPECT_TRUE(codegen::bytePairProducts(avx2->features(), avx2->microKernel()));
  for (auto [jit, a, missing] : {std::tuple{avx2.get(), DType::BF16, "AVX512_BF16"}, {avx.get(), DType::I8, "or AVX2 on the AVX2 row"}}) {
    try {
      jit->kernel(dot(GemmSpec{4, 32, 16}, a));
      ADD_FAILURE() << "no error for " << dtypeName(a) << " on the " << jit->microKernel().family << " row";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
  }
  GemmSpec mixed{4, 32, 16};
  mixed.weightType = DType::F16;
  mixed.activationType = DType::BF16;
  EXPECT_THROW(codegen::validateGemmSpec(mixed), std::invalid_argument);
}

} // namespace
} // namespace nnc::testing
