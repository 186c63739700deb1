// The argmax kernel (ArgmaxSpec in KernelSpec.h) on every CPU row this host executes:
// the first index of each row's maximum, NaN never winning (all NaN: 0), for widths
// below, at, and not a multiple of the row's vector width.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/ArgmaxEmitter.h"

namespace nnc::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The definition, scalar: the first non-NaN value no other exceeds; 0 with none.
int32_t referenceArgmax(const float* x, int64_t cols) {
  int64_t best = -1;
  for (int64_t c = 0; c < cols; ++c)
    if (!std::isnan(x[c]) && (best < 0 || x[c] > x[best])) best = c;
  return int32_t(best < 0 ? 0 : best);
}

// Runs the kernel over rows × cols (split in two calls, as threads would) and compares
// every row with the reference; the first mismatch is the failure's message.
::testing::AssertionResult argmaxMatches(const RowEngine& row, const std::vector<float>& values, int64_t cols,
                                         const char* what) {
  const int64_t rows = int64_t(values.size()) / cols;
  codegen::ArgmaxSpec s{rows, cols};
  auto f = reinterpret_cast<codegen::ArgmaxKernelFn>(row.jit->kernel(s));
  GuardedBuffer x(values.size(), true), ids(size_t(rows), true);
  x.assign(values);
  auto* out = reinterpret_cast<int32_t*>(ids.data());
  for (int64_t r = 0; r < rows; ++r) out[r] = -7;
  f(x.data(), out, 0, rows / 2);
  f(x.data(), out, rows / 2, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t want = referenceArgmax(&values[size_t(r * cols)], cols);
    if (out[r] != want)
      return ::testing::AssertionFailure()
             << row.family << " " << s.key() << " " << what << " row " << r << ": got " << out[r] << ", want " << want;
  }
  return ::testing::AssertionSuccess();
}

std::vector<int64_t> widthsFor(const RowEngine& row) {
  const int64_t W = row.jit->microKernel().vectorFloats;
  return {1, 2, W - 1, W, W + 1, 2 * W + 3, 5 * W, 1000, 32000};
}

TEST(Argmax, RandomRowsGiveTheFirstMaximum) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const RowEngine& row : executableRows())
    for (int64_t cols : widthsFor(row)) {
      if (cols < 1) continue;
      std::vector<float> v(size_t(5 * cols));
      for (float& e : v) e = normal(rng);
      ASSERT_TRUE(argmaxMatches(row, v, cols, "random"));
    }
}

// Ties: the first column wins, wherever the copies fall among the lanes.
TEST(Argmax, TiesGoToTheFirstColumn) {
  std::mt19937 rng(11);
  for (const RowEngine& row : executableRows())
    for (int64_t cols : widthsFor(row)) {
      if (cols < 2) continue;
      std::vector<float> v;
      for (int64_t r = 0; r < 6; ++r) {
        std::vector<float> one(static_cast<size_t>(cols));
        for (float& e : one) e = float(rng() % 5); // many ties among small integers
        const int64_t a = int64_t(rng() % uint32_t(cols)), b = int64_t(rng() % uint32_t(cols));
        one[size_t(a)] = one[size_t(b)] = 9.0f; // two maxima (one if a == b)
        if (r == 0) std::fill(one.begin(), one.end(), 1.0f); // all equal: 0
        if (r == 1) { std::fill(one.begin(), one.end(), 0.0f); one[size_t(cols - 1)] = -0.0f; } // -0 == +0: 0
        v.insert(v.end(), one.begin(), one.end());
      }
      ASSERT_TRUE(argmaxMatches(row, v, cols, "ties"));
    }
}

TEST(Argmax, InfinitiesAndNaN) {
  for (const RowEngine& row : executableRows())
    for (int64_t cols : widthsFor(row)) {
      if (cols < 2) continue;
      const size_t n = size_t(cols), last = n - 1;
      std::vector<std::vector<float>> cases;
      cases.push_back(std::vector<float>(n, -kInf));                  // all -inf: 0
      cases.push_back(std::vector<float>(n, kNaN));                   // all NaN: 0
      cases.push_back(std::vector<float>(n, kNaN));
      cases.back()[last] = -kInf;                                     // NaN, then -inf at the end: last
      cases.push_back(std::vector<float>(n, -kInf));
      cases.back()[last] = -1e30f;                                    // the only finite value, at the end
      cases.push_back(std::vector<float>(n, 1.0f));
      cases.back()[0] = kNaN;                                         // NaN first does not win: 1
      cases.back()[last] = kInf;                                      // +inf wins: last
      cases.push_back(std::vector<float>(n, 2.0f));
      for (size_t i = 0; i < n; i += 2) cases.back()[i] = kNaN;       // NaN in every other column: 1
      cases.push_back(std::vector<float>(n, -3.0f));
      cases.back()[n / 2] = kNaN;
      cases.back()[last] = -2.0f;                                     // -2 at the end wins
      for (const auto& c : cases) ASSERT_TRUE(argmaxMatches(row, c, cols, "inf/nan"));
    }
  // The definition itself, on a row the loop above covers: NaN first gives 1, not 0.
  const std::vector<float> nanFirst{kNaN, 1.0f, 1.0f};
  EXPECT_EQ(referenceArgmax(nanFirst.data(), 3), 1);
}

TEST(Argmax, RefusesBadShapes) {
  EXPECT_THROW(codegen::validateArgmaxSpec({1, 0}), std::invalid_argument);
  EXPECT_THROW(codegen::validateArgmaxSpec({-1, 4}), std::invalid_argument);
  EXPECT_THROW(codegen::validateArgmaxSpec({1, codegen::kArgmaxMaxCols + 1}), std::invalid_argument);
  EXPECT_NO_THROW(codegen::validateArgmaxSpec({0, 1}));
}

} // namespace
} // namespace nnc::testing
