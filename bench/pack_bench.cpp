// Weight packing speed: codegen::packWeightsPanel over one 5632 × 2048 matrix (TinyLlama's
// MLP shape) in every storage layout the AVX2 row packs, then over a 32000 × 2048 table
// read by rows (TinyLlama's embedding, rowTableLayout) in each dtype below f32; one
// thread, the source f32 matrix (46 MB, 262 MB) larger than L3 so that each pack reads it
// from DRAM as a cold load reads the weights file. Prints min and median ns a weight
// over --runs packs. The figures in docs/bench.md ("the file's rows read with pread",
// "Tables") come from it.
//   bench/build/pack_bench [--runs 15]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "compiler/codegen/PackLayout.h"

using namespace nnc;

int main(int argc, char** argv) {
  int runs = 15;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: pack_bench [--runs N]\n");
      return 2;
    }
  // Packs W (N × K) in layout L `runs` times; prints the min and median ns a weight.
  auto measure = [&](const char* name, const codegen::PanelLayout& L, const std::vector<float>& W) {
    std::vector<unsigned char> out(size_t(L.totalBytes()));
    std::vector<double> ns;
    for (int r = 0; r < runs; ++r) {
      const auto start = std::chrono::steady_clock::now();
      codegen::packWeightsPanel(L, W.data(), out.data());
      ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
                   double(L.N * L.K));
    }
    std::sort(ns.begin(), ns.end());
    std::printf("  %-32s %.2f / %.2f\n", name, ns.front(), ns[ns.size() / 2]);
  };
  auto normalMatrix = [](int64_t N, int64_t K) {
    std::vector<float> W(size_t(N * K));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 0.02f);
    for (float& w : W) w = normal(rng);
    return W;
  };
  struct Case {
    const char* name;
    DType type;
    int64_t group, kPack;
  };
  const int64_t N = 5632, K = 2048, NR = 16;
  const std::vector<float> W = normalMatrix(N, K);
  const Case cases[] = {{"i4, i8 activations (kPack 4)", DType::I4, 32, 4}, {"i4, f32 kernel (kPack 1)", DType::I4, 32, 1},
                        {"i8, i8 activations (kPack 4)", DType::I8, 0, 4}, {"i8, f32 kernel (kPack 1)", DType::I8, 0, 1},
                        {"f16 (kPack 1)", DType::F16, 0, 1},                {"bf16 (kPack 1)", DType::BF16, 0, 1},
                        {"bf16 dot products (kPack 2)", DType::BF16, 0, 2}};
  std::printf("packing %lld x %lld, NR %lld, 1 thread, %d runs: ns a weight, min / median\n", (long long)N,
              (long long)K, (long long)NR, runs);
  for (const Case& c : cases) {
    codegen::PanelLayout L{N, K, NR, false, c.type, c.group};
    L.kPack = c.kPack;
    measure(c.name, L, W);
  }
  const int64_t rows = 32000;
  const std::vector<float> table = normalMatrix(rows, K);
  std::printf("a table read by rows, %lld x %lld (rowTableLayout), 1 thread, %d runs: ns a weight, min / median\n",
              (long long)rows, (long long)K, runs);
  for (const Case& c : {Case{"i4 (two rows a panel)", DType::I4, 32, 1}, Case{"i8", DType::I8, 0, 1},
                        Case{"f16", DType::F16, 0, 1}, Case{"bf16", DType::BF16, 0, 1}})
    measure(c.name, codegen::rowTableLayout(rows, K, c.type, c.group), table);
  return 0;
}
