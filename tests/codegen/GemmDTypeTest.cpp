// GEMMs with low-precision weights (f16, bf16, i8 per channel and per tensor, i4 in
// K groups) on every CpuTable row this host can execute (RowEngines.h: the host's own
// engine with its F16C, and target engines without F16C, so both f16 widenings run),
// against the reference of GemmReference.h over the stored values: M = 1..3 (the
// accumulator sets, panels two or four a block), row-block and panel tails, primes, K blocks
// (forced KC, K not a multiple of it, groups that straddle blocks), every epilogue.
// Plus the conversions themselves bit for bit (subnormals, ±0, 65504) and the errors
// of weights a dtype cannot store.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>

#include "RowEngines.h"
#include "runtime/io/HalfFloat.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

struct Storage {
  DType type;
  int64_t group = 0;      // i4
  bool perTensor = false; // i8
  std::string name() const {
    return std::string(dtypeName(type)) + (group ? "_g" + std::to_string(group) : "") + (perTensor ? "_tensor" : "");
  }
};
const Storage kStorages[] = {{DType::F16},         {DType::BF16}, {DType::I8}, {DType::I8, 0, true},
                             {DType::I4, 32},      {DType::I4, 5}};

GemmSpec stored(GemmSpec s, const Storage& st) {
  s.weightType = st.type;
  s.quantGroup = st.group;
  return s;
}

bool check(runtime::JitEngine& jit, GemmSpec s, const Storage& st) {
  codegen::PackOptions q;
  q.perTensor = st.perTensor;
  return checkGemm(jit, stored(s, st), q);
}

// The shapes every row runs for one storage.
std::vector<GemmSpec> shapesFor(const runtime::JitEngine& jit, const Storage& st) {
  const int64_t MR = jit.microKernel().MR, NR = jit.microKernel().NR;
  const int64_t W = jit.microKernel().vectorFloats;
  std::vector<GemmSpec> specs;
  for (int64_t m : {int64_t(1), int64_t(2), int64_t(3), MR + 1})
    for (int64_t n : {int64_t(1), W + 3, NR, 2 * NR + 7})
      specs.push_back(GemmSpec{m, n, m == 1 ? 97 : 33, (m + n) % 2 == 0});
  specs.push_back(GemmSpec{2 * MR + 5, 3 * NR + 17, 64, true, Activation::Relu, true});
  // One row, many panels (i4: four a block, codegen::blockPanels): whole blocks, a
  // panel or three left over, a partial panel; K in whole groups and not.
  specs.push_back(GemmSpec{1, 9 * NR, 128, true});
  specs.push_back(GemmSpec{1, 7 * NR + 5, 97, false, Activation::None, true});
  specs.push_back(GemmSpec{13, 37, 1});
  specs.push_back(GemmSpec{MR - 1, NR - 1, 31, true, Activation::Gelu});
  GemmSpec blocked{2 * MR + 1, NR + 3, 3 * 20 + 5, true, Activation::Silu, true};
  blocked.kc = 20, blocked.mc = MR, blocked.nc = 2 * NR;
  specs.push_back(blocked);
  GemmSpec blockedRes{5, 2 * NR, 3 * 8 + 3, false, Activation::None, true};
  blockedRes.kc = 8;
  specs.push_back(blockedRes);
  std::mt19937 rng(uint32_t(12 + int(st.type)));
  std::uniform_int_distribution<int64_t> dim(1, 67);
  for (int i = 0; i < 3; ++i) specs.push_back(GemmSpec{dim(rng), dim(rng), dim(rng), bool(i % 2)});
  return specs;
}

// Every row for one storage (one test per storage, so ctest runs them side by side).
void everyRow(const Storage& st) {
  for (const RowEngine& row : executableRows()) {
    SCOPED_TRACE(row.family);
    for (const GemmSpec& s : shapesFor(*row.jit, st)) ASSERT_TRUE(check(*row.jit, s, st));
  }
}

TEST(GemmDType, F16EveryRow) {
  ASSERT_NO_FATAL_FAILURE(everyRow(kStorages[0]));
}
TEST(GemmDType, Bf16EveryRow) {
  ASSERT_NO_FATAL_FAILURE(everyRow(kStorages[1]));
}
TEST(GemmDType, I8PerChannelEveryRow) {
  ASSERT_NO_FATAL_FAILURE(everyRow(kStorages[2]));
}
TEST(GemmDType, I8PerTensorEveryRow) {
  ASSERT_NO_FATAL_FAILURE(everyRow(kStorages[3]));
}
TEST(GemmDType, I4Group32EveryRow) {
  ASSERT_NO_FATAL_FAILURE(everyRow(kStorages[4]));
}
TEST(GemmDType, I4Group5EveryRow) {
  ASSERT_NO_FATAL_FAILURE(everyRow(kStorages[5]));
}

// i8 and i4 under f32 activations on a row with vpdpbusd: digit products
// (DotGemmEmitter.h) on the host's row, and the f32 kernel on the same row planned
// without them, over the shapes every row runs (i8 per channel and per tensor, i4 in
// groups of 16, 32 and 64 k steps, with kMinDigitI4K more k steps and kMinDigitI4N more
// outputs, i8 with kMinDigitI8N more outputs: shorter or narrower weights keep the f32
// kernel), and gated GEMMs (a decoder's gate and up projections: act(gate) · up)
// of 1 to 7 rows.
TEST(GemmDType, DigitProductsAndTheF32KernelOnTheHostRow) {
  std::string why;
  runtime::JitEngine* withoutDigits = hostRowWithoutDigits(&why);
  if (!withoutDigits) GTEST_SKIP() << why;
  ASSERT_FALSE(withoutDigits->microKernel().digitProducts);
  const Storage g32 = kStorages[4];
  const int64_t longK = codegen::kMinDigitI4K;
  const int64_t wideI4 = codegen::kMinDigitI4N, wideI8 = codegen::kMinDigitI8N;
  const GemmSpec probe = stored(GemmSpec{1, wideI4, longK}, g32);
  EXPECT_FALSE(codegen::usesDigitProducts(stored(GemmSpec{1, wideI4, longK - 16}, g32), hostJit().microKernel()));
  EXPECT_FALSE(codegen::usesDigitProducts(stored(GemmSpec{1, wideI4 - 1, longK}, g32), hostJit().microKernel()));
  auto llvmIr = [&](runtime::JitEngine& jit, const GemmSpec& s) { return jit.emit(s, runtime::JitEngine::EmitForm::LLVM); };
  // Byte pairs (DotGemmEmitter.h: bytePairProducts) multiply through vpmaddubsw.
  const bool hostPairs = hostJit().microKernel().bytePairs;
  const std::string hostProducts = hostPairs ? "pmadd.ub.sw" : "vpdpbusd";
  EXPECT_NE(llvmIr(hostJit(), probe).find(hostProducts), std::string::npos);
  EXPECT_EQ(llvmIr(*withoutDigits, probe).find(hostProducts), std::string::npos);
  EXPECT_EQ(codegen::gemmPanelLayout(probe, hostJit().microKernel()).kPack, 4);
  EXPECT_EQ(codegen::gemmPanelLayout(probe, withoutDigits->microKernel()).kPack, 1);
  const GemmSpec probeI8 = stored(GemmSpec{1, wideI8, 64}, kStorages[2]);
  EXPECT_EQ(llvmIr(hostJit(), probeI8).find("vpdpbusd") != std::string::npos, !hostPairs);
  EXPECT_EQ(llvmIr(hostJit(), stored(GemmSpec{1, wideI8 - 1, 64}, kStorages[2])).find("vpdpbusd"), std::string::npos);
  EXPECT_EQ(llvmIr(*withoutDigits, probeI8).find("vpdpbusd"), std::string::npos);
  // The 8-lane row without AVX-VNNI, on any AVX2 host: digit products over i4 only, and
  // below kPairsF32Rows rows; from there the f32 kernel widens the same digit layout.
  std::unique_ptr<runtime::JitEngine> pairsEngine;
  if (!hostPairs && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    pairsEngine = runtime::JitEngine::create(runtime::JitTarget{"x86-64", "+avx,+avx2,+fma,+f16c", "avx2"});
  runtime::JitEngine* pairs = hostPairs ? &hostJit() : pairsEngine.get();
  if (pairs) {
    ASSERT_TRUE(pairs->microKernel().digitProducts && pairs->microKernel().bytePairs);
    EXPECT_NE(llvmIr(*pairs, probe).find("pmadd.ub.sw"), std::string::npos);
    EXPECT_EQ(llvmIr(*pairs, probe).find("vpdpbusd"), std::string::npos);
    GemmSpec prompt = probe;
    prompt.M = codegen::kPairsF32Rows;
    EXPECT_TRUE(codegen::widensDigitLayout(prompt, pairs->microKernel()));
    EXPECT_EQ(llvmIr(*pairs, prompt).find("pmadd.ub.sw"), std::string::npos);
    EXPECT_EQ(codegen::gemmPanelLayout(prompt, pairs->microKernel()), codegen::gemmPanelLayout(probe, pairs->microKernel()));
    EXPECT_FALSE(codegen::usesDigitProducts(probeI8, pairs->microKernel()));
  }
  // The 8-lane row's digit products (AVX-VNNI): built for a target that has it, and
  // run below when this host has it too.
  runtime::JitTarget vnni256{"x86-64", "+avx,+avx2,+fma,+avxvnni", "avx2"};
  std::unique_ptr<runtime::JitEngine> avx2Vnni = runtime::JitEngine::create(vnni256);
  ASSERT_TRUE(avx2Vnni->microKernel().digitProducts);
  EXPECT_NE(avx2Vnni->emit(probe, runtime::JitEngine::EmitForm::Assembly).find("vpdpbusd"), std::string::npos);
  std::unique_ptr<runtime::JitEngine> hostAvx2;
  if (hostJit().features().avxvnni && std::string(hostJit().microKernel().family) != "avx2_fma")
    hostAvx2 = runtime::JitEngine::create(runtime::JitTarget{hostJit().cpuName(), "", "avx2"});
  for (runtime::JitEngine* jit : {&hostJit(), withoutDigits, hostAvx2.get(), pairsEngine.get()}) {
    if (!jit) continue;
    SCOPED_TRACE(std::string(jit->microKernel().family) + (jit->microKernel().digitProducts ? ", digit products" : ", f32 kernel") +
                 (jit->microKernel().bytePairs ? " (byte pairs)" : ""));
    for (const Storage& st : {kStorages[2], kStorages[3], Storage{DType::I4, 16}, g32, Storage{DType::I4, 64}}) {
      SCOPED_TRACE(st.name());
      for (GemmSpec s : shapesFor(*jit, st)) {
        // The K tails and groups and the N tails of the grid, past the thresholds.
        if (st.type == DType::I4) s.K += longK;
        s.N += st.type == DType::I4 ? wideI4 : wideI8;
        ASSERT_TRUE(check(*jit, s, st));
      }
    }
    for (const Storage& st : {kStorages[2], g32})
      for (int64_t m : {1, 2, 3, 7})
        for (int64_t n : {wideI4, wideI4 + 32}) {
          GemmSpec gated = stored(GemmSpec{m, n, longK + 160}, st);
          gated.gated = true;
          gated.act = Activation::Silu;
          ASSERT_TRUE(check(*jit, gated, st));
        }
  }
}

// Digit products hold each activation as a multiple of s = (the largest |a| of its
// scale group; i8 weights: of its row) / (127 · 65536) (DotGemmEmitter.h): within f32's
// rounding when those magnitudes are alike (the tests above), and within s / 2 of each
// activation when one value dwarfs the rest. Here an outlier 10^4 (and one −3·10^3)
// times the other activations, over weights that are 0 at its k step, so that it
// adds nothing but its scale: every output within the f32 tolerance plus
// Σ_g s_g / 2 · Σ_{k in g} |w_k| of the reference over the stored weights.
::testing::AssertionResult outliersWithinTheirStep(const Storage& st) {
  GemmSpec s = stored(GemmSpec{2, codegen::kMinDigitI4N, codegen::kMinDigitI4K}, st);
  const int64_t group = st.type == DType::I4 ? s.quantGroup : s.K;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> A(size_t(s.M * s.K)), W(size_t(s.N * s.K));
  for (float& x : A) x = uni(rng);
  for (float& x : W) x = uni(rng);
  const int64_t outlierK[2] = {5, 40};
  A[size_t(outlierK[0])] = 1e4f;
  A[size_t(s.K + outlierK[1])] = -3e3f;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k : outlierK) W[size_t(n * s.K + k)] = 0.0f;
  runtime::Gemm gemm(hostJit(), s);
  std::vector<float> C(size_t(s.M * s.N));
  gemm.run(A.data(), gemm.pack(W.data()), nullptr, nullptr, C.data());
  const std::vector<float> stored = codegen::storedWeightValues(gemm.layout(), W.data(), {});
  double worstOverF32 = 0; // the largest error over the f32 tolerance alone, for the record
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t n = 0; n < s.N; ++n) {
      double ref = 0, mag = 0, step = 0;
      for (int64_t g0 = 0; g0 < s.K; g0 += group) {
        double maxA = 0, sumW = 0;
        for (int64_t k = g0; k < std::min(g0 + group, s.K); ++k) {
          const double a = A[size_t(m * s.K + k)], w = stored[size_t(n * s.K + k)];
          ref += a * w, mag += std::fabs(a * w), sumW += std::fabs(w);
          maxA = std::max(maxA, std::fabs(a));
        }
        step += maxA / (127.0 * 65536.0) / 2 * sumW;
      }
      const double err = std::fabs(C[size_t(m * s.N + n)] - ref), f32Tol = 1e-5 * mag + 2e-6 * std::fabs(ref);
      if (!(err <= f32Tol + step))
        return ::testing::AssertionFailure() << "m=" << m << " n=" << n << ": got " << C[size_t(m * s.N + n)]
                                             << ", want " << ref << " (bound " << f32Tol + step << ")";
      worstOverF32 = std::max(worstOverF32, err / f32Tol);
    }
  std::printf("digit products over %s with outliers: worst error %.2f x the f32 tolerance\n", st.name().c_str(),
              worstOverF32);
  return ::testing::AssertionSuccess();
}

TEST(GemmDType, DigitProductsKeepOutliersWithinTheirStep) {
  std::string why;
  if (!hostRowWithoutDigits(&why)) GTEST_SKIP() << why;
  for (const Storage& st : {kStorages[2], kStorages[4]}) // i8 without byte pairs (DotGemmEmitter.h)
    if (codegen::usesDigitProducts(stored(GemmSpec{2, codegen::kMinDigitI4N, codegen::kMinDigitI4K}, st),
                                   hostJit().microKernel())) {
      EXPECT_TRUE(outliersWithinTheirStep(st)) << st.name();
    }
}

// Decode rows of the dot kernels prefetch their weights' stream (DotGemmEmitter.cpp,
// prefetchSteps): digit products over i4 from two distances, into L1 and into L2, on
// any host; i4 × i8 from the same two where the host's measured choice keeps software
// prefetch (MicroKernelShape::prefetchesStreamedWeights), else from one, into L1; i8
// weights under digit products from the two, else not at all; i8 × i8 never
// (GemmPlan.h: dotWeightsUnprefetched). Planned for AVX-VNNI targets with the choice off
// and on, so that any host builds them.
TEST(GemmDType, DotKernelsPrefetchFromTwoDistancesWhereTheHostChoosesPrefetch) {
  std::array<std::unique_ptr<runtime::JitEngine>, 2> vnni;
  for (bool prefetch : {false, true}) {
    runtime::JitTarget target{"x86-64", "+avx,+avx2,+fma,+avxvnni", "avx2"};
    target.prefetchesStreamedWeights = prefetch;
    vnni[prefetch] = runtime::JitEngine::create(target);
    ASSERT_TRUE(vnni[prefetch]->microKernel().digitProducts);
  }
  GemmSpec gemv = stored(GemmSpec{1, codegen::kMinDigitI4N, codegen::kMinDigitI4K}, kStorages[4]);
  ASSERT_TRUE(codegen::usesDigitProducts(gemv, vnni[0]->microKernel()));
  // llvm.prefetch(ptr, read, locality, data): locality 3 asks for L1, 2 for L2.
  auto localities = [&](bool prefetch, const GemmSpec& s) {
    const std::string ir = vnni[prefetch]->emit(s, runtime::JitEngine::EmitForm::LLVM);
    std::set<char> seen;
    for (size_t at = ir.find("call void @llvm.prefetch"); at != std::string::npos; at = ir.find("call void @llvm.prefetch", at + 1)) {
      const size_t locality = ir.find("i32 0, i32 ", at);
      if (locality != std::string::npos) seen.insert(ir[locality + 11]);
    }
    return seen;
  };
  const std::set<char> two{'2', '3'}, l1{'3'}, none{};
  GemmSpec i4xi8 = gemv, i8 = stored(gemv, kStorages[2]), i8xi8 = i8;
  i4xi8.activationType = i8xi8.activationType = DType::I8;
  ASSERT_TRUE(codegen::usesDotKernel(i8, vnni[0]->microKernel()));
  for (bool prefetch : {false, true}) {
    SCOPED_TRACE(prefetch ? "host choice: prefetch" : "host choice: no prefetch");
    EXPECT_EQ(localities(prefetch, gemv), two);
    EXPECT_EQ(localities(prefetch, i4xi8), prefetch ? two : l1);
    EXPECT_EQ(localities(prefetch, i8), prefetch ? two : none);
    EXPECT_EQ(localities(prefetch, i8xi8), none);
    GemmSpec rows = gemv;
    rows.M = codegen::kDecodePrefetchRows + 1; // prompt rows: the weights stay in cache, no prefetch
    EXPECT_TRUE(localities(prefetch, rows).empty());
  }
}

// Dot kernels with one product instruction a line of weights (bf16 × bf16, i8 × i8 over
// vpdpbusd) leave their stream to the hardware prefetcher at decode rows (GemmPlan.h:
// dotWeightsUnprefetched), where the host's choice keeps prefetch and digit products
// over i8 weights on the same row prefetch. Planned for an AVX-512 target without AMX
// (the vector kernels), so that any host builds them.
TEST(GemmDType, OneProductALineDotKernelsDoNotPrefetch) {
  runtime::JitTarget target{"x86-64", "+avx,+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vnni,+avx512bf16",
                            "avx512"};
  target.prefetchesStreamedWeights = true;
  std::unique_ptr<runtime::JitEngine> jit = runtime::JitEngine::create(target);
  GemmSpec bf16 = stored(GemmSpec{1, 64, 2048}, kStorages[1]), i8 = stored(GemmSpec{1, 64, 2048}, kStorages[2]);
  GemmSpec i8xi8 = i8;
  bf16.activationType = DType::BF16;
  i8xi8.activationType = DType::I8;
  ASSERT_TRUE(codegen::usesDigitProducts(i8, jit->microKernel()));
  EXPECT_FALSE(emitsPrefetch(*jit, bf16));
  EXPECT_FALSE(emitsPrefetch(*jit, i8xi8));
  EXPECT_TRUE(emitsPrefetch(*jit, i8));
}

// Outputs of decode-shaped GEMMs (1 to 3 rows, panel tails) from two engines that plan
// the same row with different weight prefetch: the same bits.
void expectSameBitsAtDecodeRows(runtime::JitEngine& a, runtime::JitEngine& b, const Storage& st) {
  const int64_t NR = a.microKernel().NR;
  for (int64_t m : {1, 2, 3})
    for (int64_t n : {NR - 3, 3 * NR + 5}) {
      const GemmSpec s = stored(GemmSpec{m, n, 75, true, Activation::Silu}, st);
      runtime::Gemm ga(a, s), gb(b, s);
      std::mt19937 rng(uint32_t(m * 1000 + n));
      std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
      std::vector<float> A(size_t(m * s.K)), W(size_t(n * s.K)), bias(static_cast<size_t>(n));
      for (auto* v : {&A, &W, &bias})
        for (float& x : *v) x = uni(rng);
      std::vector<float> ca(size_t(m * n)), cb(size_t(m * n));
      ga.run(A.data(), ga.pack(W.data()), bias.data(), nullptr, ca.data());
      gb.run(A.data(), gb.pack(W.data()), bias.data(), nullptr, cb.data());
      EXPECT_EQ(std::memcmp(ca.data(), cb.data(), ca.size() * sizeof(float)), 0) << s.key();
    }
}

// Hosts where f16/bf16 streams run faster without software prefetch
// (MicroKernelShape::prefetchesStreamedWeights, measured per host): the host's row
// planned both ways, the same shapes; the prefetches go from f16/bf16 kernels, and from
// i8's where a dot kernel multiplies them (digit products: GemmPlan.h
// streamPrefetchClass), not from i4's, and the sums do not change.
TEST(GemmDType, HalfWeightsWithoutSoftwarePrefetch) {
  const codegen::MicroKernelShape& host = hostJit().microKernel();
  std::array<std::unique_ptr<runtime::JitEngine>, 2> engines = hostRowWithoutAndWithPrefetch();
  for (bool prefetch : {false, true}) {
    ASSERT_EQ(engines[prefetch]->microKernel().prefetchesStreamedWeights, prefetch);
    EXPECT_EQ(engines[prefetch]->weightPrefetch().how, "");
  }
  runtime::JitEngine &off = *engines[0], &on = *engines[1];
  const GemmSpec gemv{1, 4 * host.NR, 256, true};

  for (const Storage& st : {kStorages[0], kStorages[1]}) {
    SCOPED_TRACE(st.name());
    EXPECT_TRUE(emitsPrefetch(on, stored(gemv, st)));
    EXPECT_FALSE(emitsPrefetch(off, stored(gemv, st)));
    for (const GemmSpec& s : shapesFor(off, st)) ASSERT_TRUE(check(off, s, st));
  }
  EXPECT_EQ(off.weightPrefetch().how, "target");
  EXPECT_FALSE(off.weightPrefetch().prefetch);
  EXPECT_TRUE(emitsPrefetch(off, stored(gemv, kStorages[4])));
  const GemmSpec i8gemv = stored(gemv, kStorages[2]);
  EXPECT_TRUE(emitsPrefetch(on, i8gemv));
  EXPECT_EQ(emitsPrefetch(off, i8gemv), !codegen::usesDotKernel(i8gemv, off.microKernel()));
  // Bit for bit the same outputs with and without (1 to 3 rows, tails).
  for (const Storage& st : {kStorages[0], kStorages[2]}) expectSameBitsAtDecodeRows(off, on, st);
}

// The distance for f16/bf16 weights (MicroKernelShape::halfWeightPrefetchBytes, measured
// with the choice): the host's row planned 1 KiB and 4 KiB ahead. It changes the f16 and
// bf16 kernels, whose names say so, and no other kernel that follows the choice (their
// distances are their own); the sums do not change.
TEST(GemmDType, HalfWeightsPrefetchAtTheChosenDistance) {
  const codegen::MicroKernelShape& host = hostJit().microKernel();
  std::array<std::unique_ptr<runtime::JitEngine>, 2> engines;
  for (int64_t bytes : {codegen::kShortHalfWeightPrefetchBytes, codegen::kHalfWeightPrefetchBytes}) {
    runtime::JitTarget target{hostJit().cpuName(), "", host.family, host.halfRate};
    target.halfWeightPrefetchBytes = bytes;
    engines[bytes == codegen::kHalfWeightPrefetchBytes] = runtime::JitEngine::create(target);
  }
  runtime::JitEngine &near = *engines[0], &far = *engines[1];
  ASSERT_EQ(near.microKernel().halfWeightPrefetchBytes, codegen::kShortHalfWeightPrefetchBytes);
  const GemmSpec gemv{1, 4 * host.NR, 256, true};
  auto ir = [](runtime::JitEngine& jit, const GemmSpec& s) { return jit.emit(s, runtime::JitEngine::EmitForm::LLVM); };
  for (const Storage& st : {kStorages[0], kStorages[1]}) {
    SCOPED_TRACE(st.name());
    const GemmSpec s = stored(gemv, st);
    EXPECT_TRUE(emitsPrefetch(near, s));
    EXPECT_NE(ir(near, s), ir(far, s));
    EXPECT_EQ(codegen::gemmFunctionName(s, near.microKernel()), "nnc_" + s.key() + "_prefetch1024");
    EXPECT_EQ(codegen::gemmFunctionName(s, far.microKernel()), "nnc_" + s.key());
    expectSameBitsAtDecodeRows(near, far, st);
  }
  // i8 (digit products or widened) and i4 keep their own distances.
  for (const Storage& st : {kStorages[2], kStorages[4]}) {
    SCOPED_TRACE(st.name());
    EXPECT_EQ(ir(near, stored(gemv, st)), ir(far, stored(gemv, st)));
  }
}

// f16 and bf16 widen exactly: C = 1 · w for every interesting bit pattern, on every
// row (vcvtph2ps on the host engine, the integer conversion on the others).
TEST(GemmDType, HalfWideningIsExact) {
  std::vector<float> W;
  for (uint32_t h : {0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x03ffu, 0x0400u, 0x3c00u, 0xbc00u, 0x7bffu, 0xfbffu,
                     0x3555u, 0x0200u, 0x8200u, 0x1234u, 0x5678u, 0xc321u, 0x7000u})
    W.push_back(halfToFloat(uint16_t(h)));
  W.push_back(65504.0f);
  W.push_back(-1e-7f); // rounds to a subnormal
  const int64_t N = int64_t(W.size());
  for (const RowEngine& row : executableRows())
    for (DType type : {DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string(row.family) + " " + std::string(dtypeName(type)));
      GemmSpec s{1, N, 1};
      s.weightType = type;
      runtime::Gemm gemm(*row.jit, s);
      runtime::PackedWeights packed = gemm.pack(W.data());
      const std::vector<float> want =
          codegen::storedWeightValues(codegen::gemmPanelLayout(s, row.jit->microKernel()), W.data());
      const float one = 1.0f;
      std::vector<float> C(static_cast<size_t>(N));
      gemm.run(&one, packed, nullptr, nullptr, C.data());
      for (int64_t n = 0; n < N; ++n) {
        // The sum starts at +0, so -0 comes out as +0; every other value bit for bit.
        if (want[size_t(n)] == 0) {
          EXPECT_EQ(C[size_t(n)], 0.0f) << "weight " << n;
        } else {
          EXPECT_EQ(floatBits(C[size_t(n)]), floatBits(want[size_t(n)])) << "weight " << n << " = " << W[size_t(n)];
        }
        if (type == DType::F16) {
          EXPECT_EQ(floatBits(want[size_t(n)]), floatBits(halfToFloat(floatToHalf(W[size_t(n)]))));
        }
      }
    }
}

// The quantiser: symmetric, scale max|w| / 127 per channel (or per tensor), max / 7
// per channel and K group for i4 (rounded to the bf16 it is stored as), q rounded to
// nearest even.
TEST(GemmDType, QuantisedValues) {
  const std::vector<float> W = {1.0f, -0.5f, 0.25f, 0.1f, // channel 0: max 1
                                2.0f, 0.0f,  -2.0f, 0.3f}; // channel 1: max 2
  codegen::PanelLayout i8{2, 4, 16, false, DType::I8};
  std::vector<float> v = codegen::storedWeightValues(i8, W.data());
  EXPECT_FLOAT_EQ(v[0], 127 * (1.0f / 127));
  EXPECT_FLOAT_EQ(v[1], -64 * (1.0f / 127)); // -63.5 rounds to even
  EXPECT_FLOAT_EQ(v[5], 0.0f);
  EXPECT_FLOAT_EQ(v[7], 19 * (2.0f / 127)); // 19.05
  codegen::PackOptions perTensor;
  perTensor.perTensor = true;
  v = codegen::storedWeightValues(i8, W.data(), perTensor);
  EXPECT_FLOAT_EQ(v[1], -32 * (2.0f / 127)); // -31.75
  codegen::PanelLayout i4{2, 4, 16, false, DType::I4, 2};
  v = codegen::storedWeightValues(i4, W.data());
  // bf16 keeps 8 significant bits: 1/7 = 1.1428…·2^-3 is stored as 146/128 · 2^-3.
  const float s = 146.0f / 128 / 8, s4 = s / 4, s2 = s * 2;
  EXPECT_EQ(floatBits(s), floatBits(bf16ToFloat(floatToBf16(1.0f / 7))));
  EXPECT_FLOAT_EQ(v[0], 7 * s);
  EXPECT_FLOAT_EQ(v[1], -4 * s); // -0.5 / s is -3.507 (with f32's 1/7 it was -3.4999998: -3)
  EXPECT_FLOAT_EQ(v[2], 7 * s4); // group 1 of channel 0: max 0.25, 7.014
  EXPECT_FLOAT_EQ(v[3], 3 * s4); // 2.8
  EXPECT_FLOAT_EQ(v[7], 1 * s2); // group 1 of channel 1: max 2, 1.05
}

TEST(GemmDType, UnstorableWeightsAreErrors) {
  std::vector<float> W(8, 0.5f);
  W[5] = 70000.0f;
  codegen::PanelLayout f16{2, 4, 16, false, DType::F16};
  try {
    codegen::storedWeightValues(f16, W.data());
    FAIL() << "f16 accepted 70000";
  } catch (const std::domain_error& e) {
    EXPECT_NE(std::string(e.what()).find("weight [1, 1] = 70000 is beyond f16's range"), std::string::npos) << e.what();
  }
  W[5] = 65504.0f; // the largest half: fine
  EXPECT_NO_THROW(codegen::storedWeightValues(f16, W.data()));
  W[5] = std::nanf("");
  for (DType t : {DType::F16, DType::BF16, DType::I8})
    EXPECT_THROW(codegen::storedWeightValues(codegen::PanelLayout{2, 4, 16, false, t}, W.data()), std::domain_error);
  GemmSpec bad{1, 2, 3};
  bad.weightType = DType::I4; // no group
  EXPECT_THROW(codegen::validateGemmSpec(bad), std::invalid_argument);
}

} // namespace
} // namespace nnc::testing
