// Conv windows (GemmSpec::windows, an implicit GEMM): the kernel reads A's rows from the
// conv's NHWC input where they lie. Against the same GEMM over the im2col rows, made
// here in (tap, channel) order, with whole K: the same k steps in the same order, so
// the outputs must be bit-identical — on every kernel row this host executes, on 1 and
// 2 threads and under forced splits, for kernels 1×1 to 5×5, strides 1 and 2, padding
// up to 2 (taps wholly in the padding), M tails, few rows (M ≤ 3), bias, activation,
// residual, and weights stored in f16, i8 and i4 (where the host's row multiplies i8 /
// i4 over rows as digit products, against that row planned without them, which is what
// the windows run). N is a multiple of 16 so that the
// reference has no narrow-tail path (its dot products sum in another order); an odd N
// is checked against the double reference of GemmReference.h's tolerance instead.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

struct Case {
  int64_t batch, h, w, c, kh, kw, s, p, n;
  bool residual;
  DType weights;
};

codegen::GemmSpec windowsSpec(const Case& k) {
  codegen::GemmSpec g;
  g.windows = {k.h, k.w, k.c, k.kh, k.kw, k.s, k.s, k.p, k.p};
  g.M = k.batch * g.windows.outH() * g.windows.outW(), g.N = k.n, g.K = k.c * k.kh * k.kw;
  g.bias = true, g.act = codegen::Activation::Relu, g.residual = k.residual;
  g.weightType = k.weights, g.quantGroup = k.weights == DType::I4 ? 8 : 0;
  return g;
}

// The im2col rows of x [batch, h, w, c] (NHWC) in (tap, channel) order.
std::vector<float> im2colRows(const codegen::GemmSpec::Windows& w, int64_t batch, const std::vector<float>& x) {
  const int64_t ho = w.outH(), wo = w.outW(), K = w.kh * w.kw * w.c;
  std::vector<float> rows(static_cast<size_t>(batch * ho * wo * K), 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox)
        for (int64_t ky = 0; ky < w.kh; ++ky)
          for (int64_t kx = 0; kx < w.kw; ++kx) {
            const int64_t iy = oy * w.sh - w.ph + ky, ix = ox * w.sw - w.pw + kx;
            if (iy < 0 || iy >= w.h || ix < 0 || ix >= w.w) continue;
            const int64_t row = (b * ho + oy) * wo + ox, tap = ky * w.kw + kx;
            std::memcpy(&rows[size_t(row * K + tap * w.c)], &x[size_t(((b * w.h + iy) * w.w + ix) * w.c)],
                        size_t(w.c) * sizeof(float));
          }
  return rows;
}

// Uniform ±1 operands of a case: the NHWC input x, W [N][K], bias, residual.
struct Operands {
  std::vector<float> x, W, bias, res;
};
Operands randomOperands(const Case& k, const codegen::GemmSpec& spec, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = uni(rng);
    return v;
  };
  Operands o;
  o.x = random(k.batch * k.h * k.w * k.c), o.W = random(spec.N * spec.K);
  o.bias = random(spec.N), o.res = random(spec.M * spec.N);
  return o;
}

void check(runtime::JitEngine& jit, const char* family, const Case& k) {
  const codegen::GemmSpec spec = windowsSpec(k);
  codegen::GemmSpec plain = spec;
  plain.windows = {};
  plain.kc = plain.K; // whole K, as windows keep it
  SCOPED_TRACE(std::string(family) + " " + spec.key());
  const auto [x, W, bias, res] = randomOperands(k, spec, uint32_t(spec.M * 131 + spec.N * 7 + spec.K));
  const std::vector<float> rows = im2colRows(spec.windows, k.batch, x);
  // Windows keep the f32 kernel; over rows, i8 / i4 weights on a row with digit products
  // would multiply otherwise (GemmEmitter.h: usesDigitProducts), so the reference is
  // that row planned without them.
  std::string why;
  runtime::JitEngine* referenceJit = &jit;
  if (codegen::usesDigitProducts(plain, jit.microKernel())) {
    referenceJit = hostRowWithoutDigits(&why);
    ASSERT_NE(referenceJit, nullptr) << why;
  }
  runtime::Gemm windowed(jit, spec), reference(*referenceJit, plain);
  const runtime::PackedWeights packed = windowed.pack(W.data()), packedRef = reference.pack(W.data());
  const float* resPtr = k.residual ? res.data() : nullptr;
  std::vector<float> want(static_cast<size_t>(spec.M * spec.N));
  reference.run(rows.data(), packedRef, bias.data(), resPtr, want.data());

  const runtime::GemmSplit splits[] = {{2, 1}, {1, 2}, {3, 2}};
  for (int run = 0; run < 2 + int(std::size(splits)); ++run) {
    std::vector<float> got(want.size(), std::nanf(""));
    if (run < 2) windowed.run(x.data(), packed, bias.data(), resPtr, got.data(), run == 1 ? &twoThreads() : nullptr);
    else windowed.runSplit(x.data(), packed, bias.data(), resPtr, got.data(), &twoThreads(), splits[run - 2]);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "run " << run;
  }
}

TEST(GemmWindows, BitIdenticalToTheGemmOverIm2colRows) {
  const Case cases[] = {
      {2, 9, 7, 8, 3, 3, 1, 1, 16, false, DType::F32},  // M = 126: an M tail on every row
      {1, 7, 7, 4, 3, 3, 2, 1, 32, true, DType::F32},   // stride 2, residual
      {3, 11, 5, 12, 5, 5, 1, 0, 48, false, DType::F32}, // 5×5, one output column
      {1, 6, 6, 16, 1, 1, 2, 0, 64, true, DType::F32},  // 1×1 stride 2
      {2, 5, 5, 4, 3, 3, 1, 2, 16, false, DType::F32},  // padding 2: taps wholly outside
      {1, 3, 3, 8, 3, 3, 2, 0, 64, false, DType::F32},  // M = 1 (panel pairs)
      {1, 4, 3, 8, 3, 3, 1, 1, 96, true, DType::F32},   // M = 12, several panels
      {1, 14, 14, 64, 3, 3, 1, 1, 64, true, DType::F32}, // a ResNet layer's shape
      {2, 14, 14, 8, 3, 3, 1, 1, 64, true, DType::F32},  // M = 392, N = 64: 6×64 blocks (kernelShapeFor)
      {2, 9, 7, 8, 3, 3, 1, 1, 32, true, DType::F16},
      {2, 9, 7, 8, 3, 3, 2, 1, 32, false, DType::I8},
      {1, 8, 8, 16, 3, 3, 1, 1, 32, true, DType::I4},
  };
  for (const RowEngine& row : executableRows())
    for (const Case& k : cases) ASSERT_NO_FATAL_FAILURE(check(*row.jit, row.family, k));
}

// Against the double reference of the im2col rows (GemmReference.h's tolerance; i8
// and i4 weights through the values the packing stores).
void checkAgainstDouble(const Case& k, bool windowRows) {
  for (const RowEngine& row : executableRows()) {
    codegen::GemmSpec spec = windowsSpec(k);
    spec.windows.rows = windowRows;
    SCOPED_TRACE(std::string(row.family) + " " + spec.key());
    const auto [x, W, bias, res] = randomOperands(k, spec, 5);
    const std::vector<float> A = im2colRows(spec.windows, k.batch, x);
    runtime::Gemm gemm(*row.jit, spec);
    std::vector<float> got(static_cast<size_t>(spec.M * spec.N));
    gemm.run(x.data(), gemm.pack(W.data()), bias.data(), k.residual ? res.data() : nullptr, got.data(), &twoThreads());
    const std::vector<float> Ws = codegen::storedWeightValues(gemm.layout(), W.data(), {});
    for (int64_t m = 0; m < spec.M; ++m)
      for (int64_t n = 0; n < spec.N; ++n) {
        double dot = bias[size_t(n)], mag = std::fabs(bias[size_t(n)]);
        for (int64_t i = 0; i < spec.K; ++i) {
          const double p = double(A[size_t(m * spec.K + i)]) * double(Ws[size_t(n * spec.K + i)]);
          dot += p, mag += std::fabs(p);
        }
        const double r = k.residual ? res[size_t(m * spec.N + n)] : 0.0;
        const double want = referenceActivation(spec.act, dot) + r;
        mag += std::fabs(r);
        ASSERT_NEAR(got[size_t(m * spec.N + n)], want, 1e-5 * mag + 2e-6 * std::fabs(want)) << m << ", " << n;
      }
  }
}

// An N that is not a multiple of the vector width: no reference of the same sums (the
// im2col GEMM computes such a tail as dot products), so the double reference.
TEST(GemmWindows, OddNAgainstTheDoubleReference) {
  ASSERT_NO_FATAL_FAILURE(checkAgainstDouble({2, 7, 6, 8, 3, 3, 1, 1, 37, true, DType::F32}, false));
}

// Whole window rows (a first conv's few channels over a map padded beforehand): each
// row of the window one run of kw·c floats, its remainder steps after the unrolled ones.
TEST(GemmWindows, WindowRowsAgainstTheDoubleReference) {
  for (const Case& k : {Case{2, 13, 11, 3, 7, 7, 2, 0, 64, false, DType::F32}, // conv1's shape, small
                        Case{1, 40, 40, 3, 7, 7, 2, 0, 64, true, DType::F32},  // M = 289: 6×64 blocks
                        Case{3, 9, 8, 5, 3, 3, 1, 0, 37, true, DType::F32},
                        Case{1, 6, 7, 1, 5, 5, 1, 0, 16, false, DType::F32},   // one channel: runs of 5
                        Case{2, 11, 11, 3, 3, 3, 2, 0, 32, true, DType::I8},
                        Case{1, 10, 10, 4, 3, 3, 1, 0, 48, false, DType::I4},
                        // runs of 9 and 15 k steps: an unrolled step of 4 crosses a scale
                        // group of 8 (it took the previous group's scale)
                        Case{2, 11, 11, 3, 3, 3, 2, 0, 32, true, DType::I4},
                        Case{1, 9, 9, 5, 3, 3, 1, 0, 16, false, DType::I4}})
    ASSERT_NO_FATAL_FAILURE(checkAgainstDouble(k, true));
}

TEST(GemmWindows, RefusesWhatItCannotRead) {
  codegen::GemmSpec s = windowsSpec({1, 5, 5, 6, 3, 3, 1, 1, 16, false, DType::F32}); // 6 channels
  EXPECT_THROW(codegen::validateGemmSpec(s), std::invalid_argument);
  s = windowsSpec({1, 5, 5, 8, 3, 3, 1, 1, 16, false, DType::F32});
  s.K += 1;
  EXPECT_THROW(codegen::validateGemmSpec(s), std::invalid_argument);
  s = windowsSpec({1, 5, 5, 8, 3, 3, 1, 1, 16, false, DType::F32});
  s.kc = 8;
  EXPECT_THROW(codegen::validateGemmSpec(s), std::invalid_argument);
  s = windowsSpec({1, 5, 5, 8, 3, 3, 1, 1, 16, false, DType::I8});
  s.activationType = DType::I8;
  EXPECT_THROW(codegen::validateGemmSpec(s), std::invalid_argument);
  s = windowsSpec({1, 5, 5, 3, 3, 3, 1, 1, 16, false, DType::F32}); // window rows read no padding
  s.windows.rows = true;
  EXPECT_THROW(codegen::validateGemmSpec(s), std::invalid_argument);
  s.windows.ph = s.windows.pw = 0;
  s.M = 9;
  EXPECT_NO_THROW(codegen::validateGemmSpec(s));
}

} // namespace
} // namespace nnc::testing
