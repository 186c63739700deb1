// Layernorm and rmsnorm kernels against double-precision references, on every CpuTable
// row this host can execute (RowEngines.h), cols = 1..40 (every tail of every vector
// width, several groups of four vectors), primes and powers of two up to 4099.
// u = 2^-24 (f32 unit roundoff).
//
// layernorm, per element, with y = (x - mean) / sqrt(var + eps) the exact normalised
// value and y0 that of the row's first element:
//   |out - ref| <= kLayerTol · (|gamma| · (|y| + |y0| + 1) + |beta|),  kLayerTol = 6e-7 (10 u)
// Why that form: the kernel computes d = ((x - x0) - m) in f32 (NormEmitter.cpp), so d
// carries roundings relative to |x - x0| <= |x - mean| + |x0 - mean| (the |y| and |y0|
// terms) and the error of the shifted mean m, a sum of cols / (4W) terms per lane (the
// 1); then rstd (divide, sqrt, divide) and the product with gamma (+ beta) add a few
// roundings relative to |y gamma| and |beta|: about 8 u in all with sums whose error
// grows like sqrt(terms) · u, as random roundings do. Worst seen: 1.7e-7 (2.8 u) on
// every row. No term scales with |mean| / std: with an unshifted f32 mean the 1e4 +
// N(0, 1) cases fail at once (tried: off by 2e-3 at cols = 2), as would E[x²] - E[x]².
// rmsnorm, per element (no cancellation anywhere: a sum of squares, then products):
//   |out - ref| <= kRmsTol · |ref|,  kRmsTol = 6e-7 (10 u)  Worst seen: 2.2e-7 (3.7 u).
// Rows whose f32 sum of squares overflows are checked the same way (kData).
// Plus exact checks: row splits and in-place runs are bit-identical to one full run,
// no access past any buffer (guard pages), invalid specs throw, keys are distinct.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/NormEmitter.h"

namespace nnc::testing {
namespace {

using codegen::NormKernelFn;
using codegen::NormSpec;

constexpr double kLayerTol = 6e-7;
constexpr double kRmsTol = 6e-7;

std::vector<int64_t> testWidths() {
  std::vector<int64_t> c;
  for (int64_t i = 1; i <= 40; ++i) c.push_back(i);
  for (int64_t i : {61, 64, 97, 127, 128, 257, 509, 1021, 1024, 4096, 4099}) c.push_back(i);
  return c;
}

// Row data: mean + sd · N(0, 1), optionally with the first element an outlier.
struct Data {
  double mean, sd;
  bool outlierFirst = false;
};
// The last two: sums of squares beyond f32's range (each square ~1e50), which the
// kernels take again scaled (NormEmitter.cpp); without that, rows of zeros (+ beta).
constexpr Data kData[] = {{0, 1}, {1e4, 1}, {-300, 0.01}, {5, 100}, {0, 1, true}, {1e4, 1, true}, {0, 1e25}, {3e25, 1e25, true}};

NormKernelFn compile(runtime::JitEngine& jit, const NormSpec& s) {
  return reinterpret_cast<NormKernelFn>(jit.kernel(s));
}

std::vector<float> randomRows(std::mt19937& rng, int64_t rows, int64_t cols, const Data& d) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = float(d.mean + d.sd * normal(rng));
  if (d.outlierFirst && cols > 1)
    for (int64_t r = 0; r < rows; ++r) x[size_t(r * cols)] = float(d.mean + 30 * d.sd);
  return x;
}

// Worst error / allowance over the tensor (<= 1 passes); reports the first failure.
double checkLayerNorm(const NormSpec& s, const std::vector<float>& x, const std::vector<float>& gamma,
                      const std::vector<float>& beta, const std::vector<float>& out, const std::string& what) {
  double worst = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* xr = &x[size_t(r * s.cols)];
    double mean = 0, var = 0;
    for (int64_t c = 0; c < s.cols; ++c) mean += xr[c];
    mean /= double(s.cols);
    for (int64_t c = 0; c < s.cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= double(s.cols);
    const double inv = 1 / std::sqrt(var + s.eps);
    const double y0 = (xr[0] - mean) * inv;
    for (int64_t c = 0; c < s.cols; ++c) {
      double y = (xr[c] - mean) * inv;
      double b = s.shift ? beta[size_t(c)] : 0.0;
      double ref = y * gamma[size_t(c)] + b;
      double got = out[size_t(r * s.cols + c)];
      double allowance = kLayerTol * (std::fabs(gamma[size_t(c)]) * (std::fabs(y) + std::fabs(y0) + 1) + std::fabs(b));
      double ratio = std::fabs(got - ref) / allowance;
      if (!(ratio <= 1)) {
        ADD_FAILURE() << what << " " << s.key() << " row " << r << " col " << c << ": got " << got
                      << ", want " << ref << " (allowed " << allowance << ")";
        return INFINITY;
      }
      worst = std::max(worst, ratio * kLayerTol);
    }
  }
  return worst;
}

double checkRmsNorm(const NormSpec& s, const std::vector<float>& x, const std::vector<float>& gamma,
                    const std::vector<float>& out, const std::string& what) {
  double worst = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* xr = &x[size_t(r * s.cols)];
    double ms = 0;
    for (int64_t c = 0; c < s.cols; ++c) ms += double(xr[c]) * xr[c];
    const double inv = 1 / std::sqrt(ms / double(s.cols) + s.eps);
    for (int64_t c = 0; c < s.cols; ++c) {
      double ref = xr[c] * inv * gamma[size_t(c)];
      double got = out[size_t(r * s.cols + c)];
      double err = std::fabs(got - ref);
      if (!(err <= kRmsTol * std::fabs(ref))) {
        ADD_FAILURE() << what << " " << s.key() << " row " << r << " col " << c << ": got " << got
                      << ", want " << ref << " (allowed " << kRmsTol * std::fabs(ref) << ")";
        return INFINITY;
      }
      if (ref != 0) worst = std::max(worst, err / std::fabs(ref));
    }
  }
  return worst;
}

void record(const std::string& name, double worst) {
  std::ostringstream text;
  text << std::scientific << worst;
  ::testing::Test::RecordProperty(name, text.str());
  std::printf("  %s: worst %s\n", name.c_str(), text.str().c_str());
}

// Every width × data kind on every row; `kind` and `shift` as given.
void checkAll(NormSpec::Kind kind, bool shift) {
  for (const RowEngine& row : executableRows()) {
    std::vector<NormSpec> specs;
    for (int64_t cols : testWidths()) specs.push_back(NormSpec{kind, 3, cols, 1e-5, shift});
    row.jit->prepare(std::vector<codegen::KernelSpec>(specs.begin(), specs.end()));
    double worst = 0;
    for (const NormSpec& s : specs) {
      std::mt19937 rng(uint32_t(s.cols * 31 + kind * 7 + shift));
      std::uniform_real_distribution<float> uni(-1.5f, 1.5f);
      std::vector<float> gamma(size_t(s.cols)), beta(size_t(s.cols));
      for (float& g : gamma) g = uni(rng);
      for (float& b : beta) b = uni(rng);
      NormKernelFn f = compile(*row.jit, s);
      for (const Data& d : kData) {
        if (kind == NormSpec::RmsNorm && d.outlierFirst) continue;
        std::vector<float> x = randomRows(rng, s.rows, s.cols, d);
        std::vector<float> out(x.size(), NAN);
        f(x.data(), gamma.data(), shift ? beta.data() : nullptr, out.data(), 0, s.rows);
        std::string what = std::string(row.family) + " data " + std::to_string(d.mean) + "+" +
                           std::to_string(d.sd) + "N" + (d.outlierFirst ? " outlier first" : "");
        double w = kind == NormSpec::LayerNorm ? checkLayerNorm(s, x, gamma, beta, out, what)
                                               : checkRmsNorm(s, x, gamma, out, what);
        ASSERT_FALSE(std::isinf(w)) << what;
        worst = std::max(worst, w);
      }
    }
    record(std::string(row.family) + (kind == NormSpec::LayerNorm ? "_layernorm" : "_rmsnorm") +
               (shift ? "_shift" : "") + "_worst",
           worst);
  }
}

TEST(Norm, LayerNormWithBetaMatchesDoubleReference) {
  ASSERT_NO_FATAL_FAILURE(checkAll(NormSpec::LayerNorm, true));
}
TEST(Norm, LayerNormWithoutBetaMatchesDoubleReference) {
  ASSERT_NO_FATAL_FAILURE(checkAll(NormSpec::LayerNorm, false));
}
TEST(Norm, RmsNormMatchesDoubleReference) {
  ASSERT_NO_FATAL_FAILURE(checkAll(NormSpec::RmsNorm, false));
}

// Row ranges (as threads get them) and out == x give the very same bits as one call.
TEST(Norm, RowSplitsAndInPlaceAreBitIdentical) {
  for (const RowEngine& row : executableRows())
    for (NormSpec::Kind kind : {NormSpec::LayerNorm, NormSpec::RmsNorm})
      for (int64_t cols : {1, 13, 67, 1021}) {
        NormSpec s{kind, 7, cols, 1e-6, true};
        std::mt19937 rng{uint32_t(cols)};
        std::vector<float> x = randomRows(rng, s.rows, cols, {2, 3});
        std::vector<float> gamma = randomRows(rng, 1, cols, {1, 0.2}), beta = randomRows(rng, 1, cols, {0, 1});
        NormKernelFn f = compile(*row.jit, s);
        std::vector<float> whole(x.size()), parts(x.size()), inPlace = x;
        f(x.data(), gamma.data(), beta.data(), whole.data(), 0, s.rows);
        f(x.data(), gamma.data(), beta.data(), parts.data(), 0, 3);
        f(x.data(), gamma.data(), beta.data(), parts.data(), 3, 4);
        f(x.data(), gamma.data(), beta.data(), parts.data(), 4, 4); // empty range: nothing
        f(x.data(), gamma.data(), beta.data(), parts.data(), 4, s.rows);
        f(inPlace.data(), gamma.data(), beta.data(), inPlace.data(), 0, s.rows);
        EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), x.size() * sizeof(float))) << row.family << " " << s.key();
        EXPECT_EQ(0, std::memcmp(whole.data(), inPlace.data(), x.size() * sizeof(float))) << row.family << " " << s.key();
      }
}

// x, gamma, beta and out each end flush against (then start flush after) a
// PROT_NONE page: a load or store past a tail or before the start faults.
TEST(Norm, TouchesNothingOutsideItsBuffers) {
  for (const RowEngine& row : executableRows())
    for (NormSpec::Kind kind : {NormSpec::LayerNorm, NormSpec::RmsNorm})
      for (int64_t cols : {1, 3, 5, 7, 9, 15, 33, 35, 101})
        for (bool after : {true, false}) {
          NormSpec s{kind, 2, cols, 1e-5, true};
          std::mt19937 rng{uint32_t(cols)};
          GuardedBuffer x(size_t(2 * cols), after), gamma(size_t(cols), after), beta(size_t(cols), after),
              out(size_t(2 * cols), after);
          x.assign(randomRows(rng, 2, cols, {0, 1}));
          gamma.assign(std::vector<float>(size_t(cols), 1.0f));
          beta.assign(std::vector<float>(size_t(cols), 0.0f));
          compile(*row.jit, s)(x.data(), gamma.data(), kind == NormSpec::LayerNorm ? beta.data() : nullptr,
                               out.data(), 0, 2);
          std::vector<float> xs = x.values(), g = gamma.values(), b = beta.values(), o = out.values();
          const double worst = kind == NormSpec::LayerNorm ? checkLayerNorm(s, xs, g, b, o, row.family)
                                                           : checkRmsNorm(s, xs, g, o, row.family);
          ASSERT_FALSE(std::isinf(worst)) << row.family << ", " << cols << " columns";
        }
}

TEST(Norm, ConstantRowsGiveBetaAndZeroEpsIsAllowed) {
  for (const RowEngine& row : executableRows()) {
    // var = 0: out = 0 · rstd · gamma + beta = beta exactly (rstd = 1/sqrt(eps) finite).
    NormSpec s{NormSpec::LayerNorm, 2, 19, 1e-5, true};
    std::vector<float> x(38, 12345.678f), gamma(19, 3.0f), beta(19), out(38);
    for (int c = 0; c < 19; ++c) beta[size_t(c)] = float(c) - 7.25f;
    std::fill(x.begin() + 19, x.end(), -0.5f);
    compile(*row.jit, s)(x.data(), gamma.data(), beta.data(), out.data(), 0, 2);
    for (int c = 0; c < 38; ++c) EXPECT_EQ(out[size_t(c)], beta[size_t(c % 19)]) << row.family;
    // eps = 0 is valid: a row ±1 has var 1 and normalises to exactly ±1.
    NormSpec z{NormSpec::LayerNorm, 1, 6, 0.0, false};
    std::vector<float> pm = {1, -1, 1, -1, 1, -1}, one(6, 1.0f), o(6);
    compile(*row.jit, z)(pm.data(), one.data(), nullptr, o.data(), 0, 1);
    EXPECT_EQ(o, pm) << row.family;
    NormSpec zr{NormSpec::RmsNorm, 1, 6, 0.0, false};
    compile(*row.jit, zr)(pm.data(), one.data(), nullptr, o.data(), 0, 1);
    EXPECT_EQ(o, pm) << row.family;
  }
}

TEST(Norm, NaNInARowPropagatesToThatRowOnly) {
  for (NormSpec::Kind kind : {NormSpec::LayerNorm, NormSpec::RmsNorm}) {
    NormSpec s{kind, 2, 11, 1e-5, true};
    std::vector<float> x(22, 1.5f), gamma(11, 1.0f), beta(11, 0.0f), out(22);
    x[3] = NAN;
    x[12] = 4.0f;
    compile(hostJit(), s)(x.data(), gamma.data(), beta.data(), out.data(), 0, 2);
    for (int c = 0; c < 11; ++c) EXPECT_TRUE(std::isnan(out[size_t(c)]));
    for (int c = 11; c < 22; ++c) EXPECT_FALSE(std::isnan(out[size_t(c)]));
  }
}

TEST(Norm, InvalidSpecsThrow) {
  const NormSpec bad[] = {
      {NormSpec::LayerNorm, -1, 8, 1e-5, true}, {NormSpec::LayerNorm, 1, 0, 1e-5, true},
      {NormSpec::RmsNorm, 1, -3, 1e-5, false},  {NormSpec::LayerNorm, 1, 8, -1e-5, true},
      {NormSpec::RmsNorm, 1, 8, NAN, false},    {NormSpec::LayerNorm, 1, 8, INFINITY, true},
  };
  for (const NormSpec& s : bad) {
    EXPECT_THROW(codegen::validateNormSpec(s), std::invalid_argument) << s.key();
    EXPECT_THROW(hostJit().kernel(s), std::invalid_argument) << s.key();
  }
  EXPECT_NO_THROW(codegen::validateNormSpec(NormSpec{NormSpec::LayerNorm, 0, 1, 0.0, true}));
}

TEST(Norm, KeysDifferWhenTheCodeDiffersAndAreSymbolSafe) {
  std::vector<NormSpec> specs;
  for (NormSpec::Kind kind : {NormSpec::LayerNorm, NormSpec::RmsNorm})
    for (int64_t cols : {1, 8, 80})
      for (double eps : {0.0, 1e-5, 1e-6, 8.0, 0.125, 0.1})
        for (bool shift : {false, true}) specs.push_back(NormSpec{kind, 4, cols, eps, shift});
  std::set<std::string> keys;
  for (const NormSpec& s : specs) {
    std::string k = s.key();
    for (char c : k) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << k;
    keys.insert(k);
  }
  // rmsnorm ignores shift (no beta), so its two spellings share one kernel.
  EXPECT_EQ(keys.size(), specs.size() - specs.size() / 4);
  EXPECT_EQ((NormSpec{NormSpec::RmsNorm, 1, 8, 1e-6, true}.key()), (NormSpec{NormSpec::RmsNorm, 9, 8, 1e-6, false}.key()));
  EXPECT_NE((NormSpec{NormSpec::LayerNorm, 1, 8, 8.0, true}.key()), (NormSpec{NormSpec::LayerNorm, 1, 8, 0.125, true}.key()));
}

} // namespace
} // namespace nnc::testing
