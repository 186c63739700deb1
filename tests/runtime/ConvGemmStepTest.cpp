// A conv step that makes its im2col a chunk of row blocks at a time (ConvGemmSpec,
// ConvGemmStep) against the whole im2col into one buffer followed by one GEMM call:
// the same kernels on the same rows, so the outputs must be bit-identical. Chunks of one
// row block, of a few (starting and ending inside output rows), of more rows than the
// GEMM has; im2col from NCHW and NHWC; bias, relu, residual; 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "compiler/codegen/LayoutEmitter.h"
#include "runtime/jit/Gemm.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/model/StepKernels.h"

namespace {
using namespace nnc;

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

struct Case {
  codegen::LayoutSpec::Kind kind;
  int64_t batch, c, h, w, kh, kw, s, p, out;
  bool residual;
};

void check(const Case &k, int64_t chunkBlocks, int threads) {
  codegen::ConvGemmSpec spec;
  codegen::LayoutSpec &im = spec.im2col;
  im.kind = k.kind, im.batch = k.batch, im.c = k.c, im.cg = k.c, im.h = k.h, im.w = k.w;
  im.kh = k.kh, im.kw = k.kw, im.sh = im.sw = k.s, im.ph = im.pw = k.p;
  codegen::GemmSpec &g = spec.gemm;
  g.M = k.batch * im.outH() * im.outW(), g.N = k.out, g.K = k.c * k.kh * k.kw;
  g.bias = true, g.act = codegen::Activation::Relu, g.residual = k.residual;
  runtime::Gemm gemm(jit(), g);
  const int64_t mr = gemm.plan().rowBlockRows;
  spec.chunkRows = chunkBlocks * mr;
  SCOPED_TRACE(spec.key() + " threads " + std::to_string(threads));

  std::mt19937 rng(uint32_t(k.c * 31 + k.h * 7 + chunkBlocks));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v) x = uni(rng);
    return v;
  };
  const std::vector<float> x = random(k.batch * k.c * k.h * k.w), W = random(g.N * g.K), bias = random(g.N),
                           res = random(g.M * g.N);
  const runtime::PackedWeights packed = gemm.pack(W.data());
  std::unique_ptr<runtime::ThreadPool> pool = threads > 1 ? std::make_unique<runtime::ThreadPool>(threads) : nullptr;

  // The reference: the whole A, then one GEMM.
  std::vector<float> cols(static_cast<size_t>(g.M * g.K)), want(static_cast<size_t>(g.M * g.N));
  auto im2col = reinterpret_cast<codegen::LayoutKernelFn>(jit().kernel(im));
  im2col(x.data(), nullptr, cols.data(), 0, codegen::layoutUnits(im));
  gemm.run(cols.data(), packed, bias.data(), k.residual ? res.data() : nullptr, want.data());

  std::unique_ptr<runtime::StepKernel> step = runtime::makeStepKernel(jit(), spec);
  std::vector<float> scratch(static_cast<size_t>(spec.scratchFloats()), NAN), got(want.size(), NAN);
  step->run({x.data(), &packed, bias.data(), k.residual ? res.data() : nullptr, scratch.data(), got.data()}, pool.get(),
            0);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

TEST(ConvGemmStep, ChunksEqualTheWholeIm2colThenOneGemm) {
  using K = codegen::LayoutSpec;
  const Case cases[] = {
      {K::Im2col, 2, 3, 13, 11, 3, 3, 1, 1, 17, false},      // NCHW input, odd sizes
      {K::PixelsIm2col, 3, 16, 9, 7, 3, 3, 2, 1, 32, true},  // NHWC, stride 2, residual
      {K::PixelsIm2col, 1, 37, 8, 13, 5, 3, 1, 2, 9, false}, // channel tail, kh != kw
      {K::Im2col, 2, 5, 12, 12, 7, 7, 2, 3, 64, true},
  };
  for (const Case &k : cases)
    for (int64_t chunkBlocks : {1, 3, 1000})
      for (int threads : {1, 2}) ASSERT_NO_FATAL_FAILURE(check(k, chunkBlocks, threads));
}

} // namespace
