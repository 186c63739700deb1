// The per-channel kernels (ChannelSpec: a batchnorm's scale and shift, PyTorch's
// LocalResponseNorm) against double-precision references, on every CpuTable row this
// host can execute (RowEngines.h): channels 1 to 37 (primes), planes 1 (vectors), 2,
// 7, 16 and 33 (a whole and a partial vector), lrn sizes 1 to 7 (even and odd, larger
// than the channel count) and several alpha, beta, k. u = 2^-24.
//   scale/shift: |out − ref| ≤ 2u · (|x·s| + |t|) (one multiply, one add, or an FMA).
//   lrn:         |out − ref| ≤ 12u · |ref|: (size + 4) roundings of the sum, the divide, the
//                multiply and add, then powf (≤ 1 ulp in glibc) scaled by beta, and the
//                division; the sum's terms are all non-negative, so no cancellation.
// Every run fills out with NaN first, splits the images over several calls
// (bit-identical) and puts the tensors flush against inaccessible pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/ChannelEmitter.h"

namespace nnc::testing {
namespace {

using codegen::ChannelKernelFn;
using codegen::ChannelSpec;

constexpr double kU = 0x1p-24;

::testing::AssertionResult checkChannel(runtime::JitEngine& jit, const char* family, const ChannelSpec& s,
                                        bool guardAfter) {
  const int64_t n = s.batch * s.c * s.plane;
  std::mt19937 rng(uint32_t(s.c * 7919 + s.plane * 31 + s.size * 17 + s.batch));
  std::uniform_real_distribution<float> uni(-3.0f, 3.0f);
  GuardedBuffer x(size_t(n), guardAfter), out(size_t(n), !guardAfter), scale(size_t(s.c), guardAfter),
      shift(size_t(s.c), !guardAfter);
  for (size_t k = 0; k < x.size(); ++k) x.data()[k] = uni(rng);
  for (int64_t k = 0; k < s.c; ++k) scale.data()[k] = uni(rng), shift.data()[k] = uni(rng);

  auto f = reinterpret_cast<ChannelKernelFn>(jit.kernel(s));
  const int64_t cut = s.batch / 2;
  std::fill(out.data(), out.data() + n, NAN);
  f(x.data(), scale.data(), shift.data(), out.data(), 0, cut);
  f(x.data(), scale.data(), shift.data(), out.data(), cut, s.batch);
  std::vector<float> split = out.values();
  std::fill(out.data(), out.data() + n, NAN);
  f(x.data(), scale.data(), shift.data(), out.data(), 0, s.batch);
  if (std::memcmp(split.data(), out.data(), split.size() * sizeof(float)) != 0) {
    return ::testing::AssertionFailure() << family << " " << s.key() << ": split images differ from one call";
  }
  const float* xs = x.data();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t ch = 0; ch < s.c; ++ch)
      for (int64_t p = 0; p < s.plane; ++p) {
        const int64_t at = (b * s.c + ch) * s.plane + p;
        double ref, allowance;
        if (s.kind == ChannelSpec::ScaleShift) {
          double xs_ = double(xs[at]) * scale.data()[ch];
          ref = xs_ + shift.data()[ch];
          allowance = 2 * kU * (std::fabs(xs_) + std::fabs(double(shift.data()[ch])));
        } else {
          double sum = 0;
          const int64_t first = std::max<int64_t>(0, ch - s.size / 2);
          const int64_t last = std::min<int64_t>(s.c - 1, ch + std::min<int64_t>((s.size - 1) / 2, s.c));
          for (int64_t c2 = first; c2 <= last; ++c2)
            sum += double(xs[(b * s.c + c2) * s.plane + p]) * xs[(b * s.c + c2) * s.plane + p];
          ref = xs[at] / std::pow(sum / double(s.size) * s.alpha + s.k, s.beta);
          allowance = 12 * kU * std::fabs(ref) + 1e-37;
        }
        float got = out.data()[at];
        if (!(std::fabs(double(got) - ref) <= allowance)) {
          return ::testing::AssertionFailure()
                 << family << " " << s.key() << " batch " << s.batch << " (" << b << ", " << ch << ", " << p
                 << "): got " << got << ", want " << ref << " ± " << allowance;
        }
      }
  return ::testing::AssertionSuccess();
}

std::vector<ChannelSpec> specs() {
  std::vector<ChannelSpec> out;
  const int64_t channels[] = {1, 2, 5, 16, 37};
  const int64_t planes[] = {1, 2, 7, 16, 33};
  const int64_t sizes[] = {1, 2, 3, 5, 7};
  const double lrn[][3] = {{1e-4, 0.75, 2.0}, {0.5, 0.75, 1.0}, {0.1, 0.6, 1.0}, {1.0, 1.5, 0.5}};
  int64_t i = 0;
  for (int64_t c : channels)
    for (int64_t p : planes) {
      ChannelSpec s;
      s.batch = 1 + i % 3, s.c = c, s.plane = p;
      out.push_back(s);
      s.kind = ChannelSpec::Lrn;
      s.size = sizes[size_t(i) % 5];
      s.alpha = lrn[i % 4][0], s.beta = lrn[i % 4][1], s.k = lrn[i % 4][2];
      out.push_back(s);
      ++i;
    }
  return out;
}

TEST(Channel, ScaleShiftAndLrnMatchReference) {
  for (const RowEngine& row : executableRows()) {
    std::vector<ChannelSpec> all = specs();
    row.jit->prepare(std::vector<codegen::KernelSpec>(all.begin(), all.end()));
    size_t checked = 0;
    for (const ChannelSpec& s : all) {
      ASSERT_TRUE(checkChannel(*row.jit, row.family, s, checked % 2 == 0));
      ++checked;
    }
    std::printf("  %s: %zu specs\n", row.family, checked);
  }
}

// Windows far wider than the channels (lrn(20000) over 3 channels, lrn(2^63 - 1)): only
// the channels inside count, and the kernel loops over them. It unrolled every term of
// the window: lrn(20000) did not compile in a minute, lrn(2^62) never (ctest's timeout
// is what would catch that again).
TEST(Channel, LrnWindowsWiderThanTheChannelsCompileAtOnce) {
  for (const RowEngine& row : executableRows()) {
    for (int64_t size : {int64_t(64), int64_t(20000), int64_t(1) << 62, INT64_MAX}) {
      ChannelSpec s;
      s.kind = ChannelSpec::Lrn, s.batch = 2, s.c = 3, s.plane = 17, s.size = size;
      s.alpha = 0.5, s.beta = 0.75, s.k = 1.0;
      ASSERT_TRUE(checkChannel(*row.jit, row.family, s, size % 2 == 0));
    }
  }
}

TEST(Channel, InvalidSpecsThrow) {
  ChannelSpec ok;
  ok.c = 3, ok.plane = 4;
  EXPECT_NO_THROW(codegen::validateChannelSpec(ok));
  ChannelSpec s = ok;
  s.c = 0;
  EXPECT_THROW(codegen::validateChannelSpec(s), std::invalid_argument);
  s = ok, s.plane = 0;
  EXPECT_THROW(codegen::validateChannelSpec(s), std::invalid_argument);
  s = ok, s.batch = -1;
  EXPECT_THROW(codegen::validateChannelSpec(s), std::invalid_argument);
  s = ok, s.kind = ChannelSpec::Lrn, s.size = 0;
  EXPECT_THROW(codegen::validateChannelSpec(s), std::invalid_argument);
  s = ok, s.kind = ChannelSpec::Lrn, s.beta = NAN;
  EXPECT_THROW(codegen::validateChannelSpec(s), std::invalid_argument);
}

TEST(Channel, LrnKeyNamesItsConstants) {
  ChannelSpec a;
  a.kind = ChannelSpec::Lrn, a.c = 8, a.plane = 9, a.size = 5;
  ChannelSpec b = a;
  b.k = 2;
  ChannelSpec c = a;
  c.alpha = -a.alpha;
  EXPECT_NE(a.key(), b.key());
  EXPECT_NE(a.key(), c.key());
  b = a, b.batch = 4; // runtime range
  EXPECT_EQ(a.key(), b.key());
}

} // namespace
} // namespace nnc::testing
