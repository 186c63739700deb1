// Convolutions as nnc lowers them (groups 1: im2col from NCHW or NHWC and one GEMM whose
// result stays NHWC; groups > 1: im2col, GEMM per group, back to NCHW planes; one
// input channel per group: the depthwise kernel) against a direct double-precision convolution, on
// random shapes: prime channel counts and plane sizes, every kernel / stride / padding
// kind, groups 1, 2, 3 and depthwise with multipliers, batch 1 and 3, 1 and 2 threads,
// with bias, fused activation and residual. Weights and input are uniform in ±1 (the
// random weight store), so |out| ≤ taps + 1; the bound is 1e-6 · (taps + 1), about 16 u
// per tap: a dot product of n f32 terms in any order stays within n·u of Σ|terms|.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "CompileHelpers.h"
#include "runtime/model/CompiledModel.h"

namespace {
using namespace nnc;

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

struct Case {
  std::string layer; // the conv statement
  int64_t c, h, w;
  bool relu = false, residual = false;
};

// out[b, o, i, j] = bias[o] + Σ W[o, ci, r, s] · x[b, g·cg + ci, i·sh − ph + r, j·sw − pw + s]
std::vector<double> directConv(const runtime::WeightStore &ws, const std::string &name, const std::vector<float> &x,
                               int64_t batch, int64_t c, int64_t h, int64_t w, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t out = a.out, ho = op.type.shape[2], wo = op.type.shape[3], cg = c / a.groups, ng = out / a.groups;
  const auto &W = ws.get(name + ".weight").values();
  std::vector<double> y(size_t(batch * out * ho * wo));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double s = a.bias ? ws.get(name + ".bias").values()[size_t(o)] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t r = 0; r < a.kh; ++r)
              for (int64_t q = 0; q < a.kw; ++q) {
                int64_t yy = i * a.sh - a.ph + r, xx = j * a.sw - a.pw + q;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                s += double(W[size_t(((o * cg + ci) * a.kh + r) * a.kw + q)]) *
                     x[size_t(((b * c + (o / ng) * cg + ci) * h + yy) * w + xx)];
              }
          y[size_t(((b * out + o) * ho + i) * wo + j)] = s;
        }
  return y;
}

// afterPointwise: the conv reads the output of a 1×1 conv `pre` (c → c channels), so
// its input is the NHWC map a conv leaves (docs/lowering.md, "Feature-map layouts"):
// im2col from NHWC with the weight's columns reordered, or a conversion back to planes.
void check(const Case &k, int64_t batch, int threads, bool afterPointwise) {
  std::string body = "conv = " + k.layer + (k.relu ? " relu" : "");
  if (k.residual) body = "residual { " + body + " }";
  if (afterPointwise) body = "pre = conv2d(" + std::to_string(k.c) + ", kernel=1) " + body;
  std::string src = "model m { input x: [" + std::to_string(k.c) + ", " + std::to_string(k.h) + ", " +
                    std::to_string(k.w) + "] " + body + " }";
  auto c = test::compile(src, {{"batch", batch}}, /*lower=*/true);
  ASSERT_TRUE(c.ok) << src << "\n" << c.diagnostics;
  const ir::Op *conv = nullptr, *pre = nullptr;
  for (const auto &op : c.graph->ops) {
    if (op.name == "conv") conv = &op;
    if (op.name == "pre") pre = &op;
  }
  ASSERT_NE(conv, nullptr);
  ASSERT_EQ(pre != nullptr, afterPointwise);
  const ir::Op convOp = *conv;
  const std::optional<ir::Op> preOp = pre ? std::optional<ir::Op>(*pre) : std::nullopt;
  runtime::CompiledModel model(c.program(), jit(), threads);
  auto ws = runtime::WeightStore::random(model.program().tensors, 7);
  model.setWeights(ws);
  std::mt19937 rng(uint32_t(k.c * 131 + k.h * 17 + k.w));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(size_t(model.inputType().elements()));
  for (auto &v : x) v = uni(rng);
  std::vector<float> got(size_t(model.outputType().elements()));
  model.run(x.data(), got.data());
  std::vector<float> convIn = x; // pre's output, rounded to f32 as nnc stores it
  double inBound = 1;             // a bound on |convIn|
  if (preOp) {
    const std::vector<double> y = directConv(ws, "pre", x, batch, k.c, k.h, k.w, *preOp);
    convIn.assign(y.begin(), y.end());
    inBound = double(k.c + 1);
  }
  std::vector<double> want = directConv(ws, "conv", convIn, batch, k.c, k.h, k.w, convOp);
  ASSERT_EQ(got.size(), want.size());
  const double taps = double(k.c / convOp.attrs.groups * convOp.attrs.kh * convOp.attrs.kw);
  const double bound = 1e-6 * (taps + 1) * inBound + (preOp ? 1e-6 * (k.c + 1) * taps : 0.0);
  for (size_t i = 0; i < got.size(); ++i) {
    double ref = want[i];
    if (k.relu) ref = std::max(ref, 0.0);
    if (k.residual) ref += convIn[i];
    ASSERT_NEAR(got[i], ref, bound) << src << " batch " << batch << " threads " << threads << " element " << i;
  }
}

TEST(ConvLowering, MatchesDirectConvolutionOnRandomShapes) {
  const Case cases[] = {
      {"conv2d(5, kernel=3, pad=1)", 3, 7, 7, true, false},
      {"conv2d(7, kernel=3, stride=2, pad=1)", 5, 13, 11},
      {"conv2d(11, kernel=5)", 3, 9, 17, true},
      {"conv2d(6, kernel=1, stride=2)", 7, 7, 5},
      {"conv2d(13, kernel=1)", 13, 5, 3, false, true},
      {"conv2d(6, kernel=(3, 5), stride=(2, 1), pad=(1, 2), groups=3)", 9, 11, 7, true},
      {"conv2d(4, kernel=3, pad=1, groups=2, bias=false)", 6, 6, 6, false, false},
      {"conv2d(8, kernel=3, pad=1, groups=2)", 8, 5, 5, true, true},
      {"conv2d(3, kernel=11, stride=4, pad=2)", 3, 31, 29},
      {"conv2d(2, kernel=3, pad=3)", 1, 2, 3},
      {"depthwise(3, pad=1)", 7, 9, 9, true, true},
      {"depthwise(3, stride=2, pad=1, multiplier=2)", 5, 11, 8},
      {"depthwise(5, stride=(1, 2), bias=false)", 3, 7, 13},
      {"depthwise((1, 3), pad=(0, 1), multiplier=3)", 2, 1, 17, true},
      {"conv2d(12, kernel=3, stride=2, pad=2, groups=6)", 6, 10, 9, true, false}, // groups = channels
      {"depthwise(3, pad=1, multiplier=1)", 16, 19, 19, false, true},
      // over one channel with a window of more than 64 taps: the GEMM, not the
      // depthwise kernel
      {"conv2d(8, kernel=(1, 100), stride=(1, 7), pad=(0, 3))", 1, 2, 211, true},
      {"depthwise((3, 30), pad=(1, 15), multiplier=2)", 1, 5, 97, true},
      // a depthwise window of more than 32 columns and 1024 taps: the depthwise kernel,
      // looping over the window's columns
      {"depthwise((1, 1100), pad=(0, 500), multiplier=2)", 3, 1, 1201, true},
      {"depthwise((33, 35), stride=(2, 3), pad=(16, 20))", 3, 40, 70, true},
      // more than 256 taps a window: the im2col loops over them (from NCHW, and from the
      // NHWC map the pointwise conv before it leaves)
      {"conv2d(4, kernel=(2, 150), stride=(1, 7), pad=(1, 10))", 2, 3, 400, true},
  };
  for (const Case &k : cases)
    for (int64_t batch : {1, 3})
      for (int threads : {1, 2})
        for (bool afterPointwise : {false, true}) ASSERT_NO_FATAL_FAILURE(check(k, batch, threads, afterPointwise));
}

// Pools over NCHW planes against a direct pool in double, where the planes' kernel runs
// and where the window is so wide that the planes are pooled as one-channel NHWC images
// (compiler/ops/PoolOps.cpp: a maxpool((1, 1500), pad=(0, 750)) over 3000 columns took
// minutes and 6.6 GB to compile): max and avg with padding, and global_avgpool.
TEST(PoolLowering, WideWindowsLoopAndGiveTheDirectPool) {
  struct PoolCase {
    std::string layer;
    int64_t c, h, w;
    bool global = false;
  };
  const PoolCase cases[] = {
      {"maxpool(3, stride=2, pad=1)", 3, 9, 11},                 // the planes' kernel
      {"maxpool((1, 300), stride=1, pad=(0, 150))", 2, 1, 700},  // one-channel images
      {"avgpool((2, 200), stride=(1, 3), pad=(1, 100))", 3, 3, 500},
      {"global_avgpool", 2, 1, 20000, true},
      {"global_avgpool", 3, 7, 7, true},
  };
  for (const PoolCase &k : cases) {
    const std::string src = "model m { input x: [" + std::to_string(k.c) + ", " + std::to_string(k.h) + ", " +
                            std::to_string(k.w) + "] p = " + k.layer + " }";
    auto c = test::compile(src, {{"batch", 2}}, /*lower=*/true);
    ASSERT_TRUE(c.ok) << src << "\n" << c.diagnostics;
    const ir::Op *pool = nullptr;
    for (const auto &op : c.graph->ops)
      if (op.name == "p") pool = &op;
    ASSERT_NE(pool, nullptr);
    const ir::LayerAttrs a = k.global ? ir::LayerAttrs{} : pool->attrs;
    const int64_t kh = k.global ? k.h : a.kh, kw = k.global ? k.w : a.kw, sh = k.global ? 1 : a.sh,
                  sw = k.global ? 1 : a.sw, ph = k.global ? 0 : a.ph, pw = k.global ? 0 : a.pw;
    const bool max = pool->kind == ir::OpKind::MaxPool;
    runtime::CompiledModel model(c.program(), jit(), 2);
    model.setWeights(runtime::WeightStore::random(model.program().tensors, 1)); // none: a pool has no weights
    std::mt19937 rng(uint32_t(k.w));
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<float> x(size_t(model.inputType().elements()));
    for (auto &v : x) v = uni(rng);
    std::vector<float> got(size_t(model.outputType().elements()));
    model.run(x.data(), got.data());
    const int64_t ho = (k.h + 2 * ph - kh) / sh + 1, wo = (k.w + 2 * pw - kw) / sw + 1;
    ASSERT_EQ(int64_t(got.size()), 2 * k.c * ho * wo) << src;
    for (int64_t plane = 0; plane < 2 * k.c; ++plane)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double acc = max ? -INFINITY : 0.0;
          for (int64_t r = 0; r < kh; ++r)
            for (int64_t s2 = 0; s2 < kw; ++s2) {
              const int64_t ih = i * sh - ph + r, iw = j * sw - pw + s2;
              if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue; // padding: avg counts it as 0
              const double v = x[size_t((plane * k.h + ih) * k.w + iw)];
              acc = max ? std::max(acc, v) : acc + v;
            }
          if (!max) acc /= double(kh * kw);
          const double bound = max ? 0.0 : 1e-6 * std::sqrt(double(kh * kw)) + 1e-7;
          ASSERT_NEAR(got[size_t((plane * ho + i) * wo + j)], acc, bound)
              << src << " plane " << plane << " (" << i << ", " << j << ")";
        }
  }
}

} // namespace
