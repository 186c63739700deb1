// The wide FMA rows (avx512: 12×32 blocks of 16-float vectors, 32 registers, masked
// partial stores; avx2_fma: 6×16) each get the full shape sweep of GemmShapesTest,
// forced on this host, whichever of them the host's calibration chose (hostJit() runs
// the sweeps on that one too): every M, N and K from 1 to 67 (all row-block, panel,
// N-tail and K-remainder cases of both rows, the masked tails of the AVX-512 row),
// primes, the narrow tail, panel pairs (M <= 3), K blocks and MC/NC chunks, every
// epilogue. A row the host cannot execute is skipped with the reason printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/GemmEmitter.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

GemmSpec blocked(GemmSpec s, int64_t kc, int64_t mc, int64_t nc) {
  s.kc = kc, s.mc = mc, s.nc = nc;
  return s;
}

void sweep(const std::string& family, bool halfRate = false) {
  std::string why;
  std::unique_ptr<runtime::JitEngine> jit = rowEngine(family, &why, halfRate);
  if (!jit) GTEST_SKIP() << why;
  ASSERT_STREQ(jit->microKernel().family, family.c_str());
  ASSERT_EQ(jit->microKernel().halfRate, halfRate);
  const int64_t MR = jit->microKernel().MR, NR = jit->microKernel().NR;
  for (int64_t m = 1; m <= 67; ++m) ASSERT_TRUE(checkGemm(*jit, GemmSpec{m, 19, 7, true}));
  for (int64_t n = 1; n <= 67; ++n) ASSERT_TRUE(checkGemm(*jit, GemmSpec{7, n, 5, true}));
  for (int64_t k = 1; k <= 67; ++k) ASSERT_TRUE(checkGemm(*jit, GemmSpec{13, 37, k}));
  for (int64_t m : {int64_t(1), int64_t(2), int64_t(3), MR - 1, MR, MR + 1, 2 * MR + 5})
    for (int64_t n : {int64_t(1), int64_t(15), int64_t(16), int64_t(17), NR - 1, NR, NR + 1,
                      2 * NR, 2 * NR + 7, 3 * NR + 17})
      for (int64_t k : {1, 4, 9, 64, 97}) ASSERT_TRUE(checkGemm(*jit, GemmSpec{m, n, k, (m + n + k) % 2 == 0}));
  std::mt19937 rng(2025);
  std::uniform_int_distribution<int64_t> dim(1, 67);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(checkGemm(*jit, GemmSpec{dim(rng), dim(rng), dim(rng), bool(i % 2)}));
  const GemmSpec large[] = {
      {97, 128, 255, true}, {255, 257, 97, true, Activation::Relu}, {64, 784, 256, true, Activation::Relu},
      {1, 1000, 784, true}, {128, 97, 1000}, {257, 255, 128, false, Activation::None, true},
      {1, 1001, 1531, true, Activation::Tanh, true}, {3, 256, 131, true}, {2, 200, 64}};
  for (const GemmSpec& s : large) ASSERT_TRUE(checkGemm(*jit, s));
  for (Activation act : codegen::kAllActivations)
    for (bool residual : {false, true}) ASSERT_TRUE(checkGemm(*jit, GemmSpec{MR + 1, NR + 5, 53, true, act, residual}));
  // K blocks (K not a multiple of KC), row and panel chunks, with every tail.
  for (int64_t kc : {8, 20})
    for (int64_t m : {int64_t(1), int64_t(5), 2 * MR + 1})
      for (int64_t n : {int64_t(7), NR + 3, 3 * NR})
        ASSERT_TRUE(
            checkGemm(*jit, blocked(GemmSpec{m, n, 3 * kc + 5, true, Activation::Relu, m % 2 == 1}, kc, MR, 2 * NR)));
  ASSERT_TRUE(checkGemm(*jit, blocked(GemmSpec{41, 70, 300, true, Activation::Gelu, true}, 64, 2 * MR, NR)));
  // K blocks the planner chooses (a whole-K panel past half of any L2 up to 5 MiB): the
  // L1-sized KC, or kHalfRateKC at half rate; a prime K leaves a short last block.
  const GemmSpec longK{2 * MR + 5, NR + 9, 20011, true, Activation::Relu, true};
  const codegen::ResolvedBlocking plan = codegen::gemmBlocking(longK, jit->microKernel());
  ASSERT_GT(plan.kBlocks, 1);
  if (halfRate) {
    ASSERT_EQ(plan.KC, codegen::kHalfRateKC);
  }
  ASSERT_TRUE(checkGemm(*jit, longK));
}

TEST(GemmRows, Avx512RowSweep) {
  ASSERT_NO_FATAL_FAILURE(sweep("avx512"));
}
TEST(GemmRows, Avx2FmaRowSweep) {
  ASSERT_NO_FATAL_FAILURE(sweep("avx2_fma"));
}
// Planned as on a host that runs it at half rate (Zen 4): whole K, and tail panels whose
// last vector holds at most 8 columns accumulate it in a 256-bit vector.
TEST(GemmRows, Avx512RowSweepAtHalfRate) {
  ASSERT_NO_FATAL_FAILURE(sweep("avx512", true));
}

// At half rate the 23 columns of 23³ take a 16-lane and an 8-lane vector (ymm FMAs
// next to the zmm ones); at full rate two 16-lane vectors, and the results agree.
TEST(GemmRows, Avx512HalfRateNarrowsTheLastTailVector) {
  std::string why;
  auto half = rowEngine("avx512", &why, true), full = rowEngine("avx512", &why, false);
  if (!half) GTEST_SKIP() << why;
  const GemmSpec s{23, 23, 23, true, Activation::Relu};
  auto fmasOn = [](const std::string& text, const char* reg) { // FMA lines naming `reg`
    std::istringstream in(text);
    int count = 0;
    for (std::string line; std::getline(in, line);)
      count += line.find("vfmadd") != std::string::npos && line.find(reg) != std::string::npos;
    return count;
  };
  const std::string halfText = half->emit(s, runtime::JitEngine::EmitForm::Assembly);
  const std::string fullText = full->emit(s, runtime::JitEngine::EmitForm::Assembly);
  EXPECT_GT(fmasOn(halfText, "%ymm"), 0);
  EXPECT_GT(fmasOn(halfText, "%zmm"), 0);
  EXPECT_EQ(fmasOn(fullText, "%ymm"), 0);
  EXPECT_GT(fmasOn(fullText, "%zmm"), 0);
  for (int64_t n : {17, 24, 40, 57, 88}) // N % 16 in 1..8, tails after full panels
    for (int64_t m : {1, 11, 25}) {
      const GemmSpec t{m, n, 29, m % 2 == 1, Activation::Gelu, n % 2 == 0};
      runtime::Gemm a(*half, t), b(*full, t);
      std::mt19937 rng(uint32_t(m * 100 + n));
      std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
      std::vector<float> A(size_t(m * 29)), W(size_t(n * 29)), bias(static_cast<size_t>(n)), res(size_t(m * n));
      for (auto* v : {&A, &W, &bias, &res})
        for (float& x : *v) x = uni(rng);
      std::vector<float> ca(size_t(m * n)), cb(size_t(m * n));
      a.run(A.data(), a.pack(W.data()), bias.data(), res.data(), ca.data());
      b.run(A.data(), b.pack(W.data()), bias.data(), res.data(), cb.data());
      EXPECT_EQ(std::memcmp(ca.data(), cb.data(), ca.size() * sizeof(float)), 0) << t.key();
    }
}

// The AVX-512 row stores N tails with one masked vmovups (mask register) and computes
// on zmm registers; the AVX2 row keeps 256-bit code (its partial stores are pieces).
TEST(GemmRows, Avx512TailsAreMaskedStores) {
  std::string why;
  auto jit = rowEngine("avx512", &why);
  if (!jit) GTEST_SKIP() << why;
  const std::string text = jit->emit(GemmSpec{13, 37, 19, true}, runtime::JitEngine::EmitForm::Assembly);
  EXPECT_NE(text.find("%zmm"), std::string::npos);
  EXPECT_NE(text.find("{%k"), std::string::npos) << "no masked store or load";
  EXPECT_EQ(text.find("vmaskmov"), std::string::npos);
  auto avx2 = rowEngine("avx2_fma", &why);
  ASSERT_TRUE(avx2);
  const std::string narrow = avx2->emit(GemmSpec{13, 37, 19, true}, runtime::JitEngine::EmitForm::Assembly);
  EXPECT_EQ(narrow.find("%zmm"), std::string::npos);
}

// The lines of each spec's kernel on the avx512 and avx2_fma rows the host can build,
// to body(family, spec, lines); a row it cannot build is skipped, saying why.
void forEachRowAssembly(std::initializer_list<GemmSpec> specs,
                        const std::function<void(const std::string&, const GemmSpec&, const std::vector<std::string>&)>& body) {
  for (const char* family : {"avx512", "avx2_fma"}) {
    std::string why;
    auto jit = rowEngine(family, &why);
    if (!jit) {
      std::printf("[ SKIPPED  ] row %s: %s\n", family, why.c_str());
      continue;
    }
    for (const GemmSpec& s : specs) {
      std::istringstream in(jit->emit(s, runtime::JitEngine::EmitForm::Assembly));
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      body(family, s, lines);
    }
  }
}

// Rows of A read in place (no packed A) are broadcast straight into the FMAs, addressed
// as one pointer the k loop advances + a constant: an index register in an FMA's memory
// operand splits it in two µops on Intel cores (GemmEmitter.cpp, forKOverRowsOfA).
// 16³, 12×16×64 and 64×16×128 take one-vector rows (a 16-column panel) on the AVX-512
// row, whose broadcasts fold into the FMAs (AVX2's FMAs cannot broadcast from memory).
TEST(GemmRows, BroadcastFmasAddressAWithoutAnIndexRegister) {
  ASSERT_NO_FATAL_FAILURE((forEachRowAssembly({GemmSpec{16, 16, 16}, GemmSpec{12, 16, 64, true}, GemmSpec{64, 16, 128}},
                     [](const std::string& family, const GemmSpec& s, const std::vector<std::string>& lines) {
    int memoryFmas = 0, indexed = 0;
    for (const std::string& line : lines) {
      if (line.find("vfmadd") == std::string::npos || line.find('(') == std::string::npos) continue;
      ++memoryFmas;
      const std::string operand = line.substr(line.find('('), line.find(')') - line.find('('));
      indexed += operand.find(',') != std::string::npos; // (%base,%index,scale)
    }
    if (family == "avx512") { // VEX FMAs cannot broadcast from memory
      EXPECT_GT(memoryFmas, 0) << family << " " << s.key() << ": no broadcast folded into an FMA";
    }
    EXPECT_EQ(indexed, 0) << family << " " << s.key();
  })));
}

// A block's rows of C are stored at one address + i·N·4 (GemmEmitter.cpp, emitEpilogue):
// no register per row, which 16³'s 16 rows spilled to the stack (and reloaded around
// the stores) before. The C stores then share a base and index register or two.
TEST(GemmRows, RowsOfABlockStoreAtConstantDisplacements) {
  ASSERT_NO_FATAL_FAILURE((forEachRowAssembly({GemmSpec{16, 16, 16}, GemmSpec{12, 32, 64}},
                     [](const std::string& family, const GemmSpec& s, const std::vector<std::string>& lines) {
    std::set<std::string> registers; // of the stores' addresses, displacement dropped
    for (const std::string& line : lines)
      if (line.rfind("\tvmovups\t%", 0) == 0 && line.find('(') != std::string::npos)
        registers.insert(line.substr(line.find('(')));
    EXPECT_FALSE(registers.empty()) << family << " " << s.key();
    EXPECT_LE(registers.size(), 2u) << family << " " << s.key() << ": C rows addressed through a register each";
  })));
}

} // namespace
} // namespace nnc::testing
