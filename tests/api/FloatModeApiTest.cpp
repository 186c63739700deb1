// How a run treats subnormal f32 values and the caller's floating-point mode
// (Options::keepDenormals, runtime/FloatMode.h, docs/api.md "Denormals"), through
// libnnc.so as a host links it:
//  - by default a run flushes them: a product whose result would be subnormal is 0
//    (FTZ), a subnormal input is read as 0 (DAZ); with keepDenormals both come out as
//    IEEE arithmetic gives them, exactly;
//  - on two threads the pool's workers compute in the same mode as the caller, so every
//    row of a layer split between threads gets it (the workers were made by a thread
//    in the default mode);
//  - the caller's own mode (rounding toward zero here) changes no bit of the output, and
//    the caller has it back after the run;
//  - weights are prepared with subnormals kept whatever the caller's mode: a chain of two
//    dense layers folded at load from subnormal weights, loaded by a thread that flushes,
//    gives the bits of the same weights loaded in the default mode.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nnc/nnc.h"

namespace {

constexpr int64_t kRows = 64, kIn = 256, kOut = 512; // large enough for two threads to split
const std::string kSource = "model m {\n  input x: [256]\n  fc = dense(512, bias=false)\n}\n";

struct Tensor {
  std::string name;
  int64_t rows, cols;
  std::vector<float> values;
};

// A .safetensors image of `tensors` (f32, 2-D).
std::string weightsFile(const std::vector<Tensor> &tensors) {
  std::string header = "{", data;
  for (const Tensor &t : tensors) {
    header += (header.size() > 1 ? ",\"" : "\"") + t.name + "\":{\"dtype\":\"F32\",\"shape\":[" +
              std::to_string(t.rows) + "," + std::to_string(t.cols) + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + t.values.size() * 4) + "]}";
    data.append(reinterpret_cast<const char *>(t.values.data()), t.values.size() * 4);
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

nnc::Options options(int threads, bool keepDenormals) {
  nnc::Options o;
  o.kernelCacheDir = "";
  o.batch = kRows;
  o.threads = threads;
  o.keepDenormals = keepDenormals;
  return o;
}

// The output of `source` over kRows rows of x with the weights `tensors`, loaded in the
// MXCSR `loadMode` (none: the caller's).
std::vector<float> run(const std::string &source, const nnc::Options &o, const std::vector<float> &x,
                       const std::vector<Tensor> &tensors, std::optional<uint32_t> loadMode = std::nullopt) {
  nnc::Model m = nnc::Model::fromSource(source, o);
  const std::string file = weightsFile(tensors);
  const uint32_t callers = _mm_getcsr();
  if (loadMode) _mm_setcsr(*loadMode);
  m.loadWeights(file.data(), file.size());
  _mm_setcsr(callers);
  std::vector<float> y(size_t(m.outputElements()), -1.0f);
  m.run(x.data(), y.data());
  return y;
}

// The output of fc over kRows rows of x with weights w, on `threads` threads.
std::vector<float> run(const std::vector<float> &x, const std::vector<float> &w, int threads, bool keepDenormals) {
  return run(kSource, options(threads, keepDenormals), x, {{"fc.weight", kOut, kIn, w}});
}

std::vector<float> filled(size_t n, float v) { return std::vector<float>(n, v); }

// How many of `y` differ from `want` (compared as bits), and the first one.
std::string mismatches(const std::vector<float> &y, float want) {
  size_t count = 0, first = 0;
  for (size_t i = 0; i < y.size(); ++i)
    if (std::memcmp(&y[i], &want, 4) != 0 && count++ == 0) first = i;
  if (!count) return "";
  std::ostringstream s;
  s << count << " of " << y.size() << " differ, the first y[" << first << "] = " << std::scientific << y[first]
    << " for " << want;
  return s.str();
}

TEST(Denormals, ProductsThatWouldBeSubnormalAreZeroUnlessKept) {
  // Every x·w is 2^-70 · 2^-70 = 2^-140, below the least normal f32 (2^-126): the sum of
  // 256 of them is 2^-132 kept, 0 flushed.
  const auto x = filled(size_t(kRows * kIn), std::ldexp(1.0f, -70));
  const auto w = filled(size_t(kOut * kIn), std::ldexp(1.0f, -70));
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    EXPECT_EQ(mismatches(run(x, w, threads, false), 0.0f), "");
    EXPECT_EQ(mismatches(run(x, w, threads, true), std::ldexp(1.0f, -132)), "");
  }
}

TEST(Denormals, SubnormalInputsReadAsZeroUnlessKept) {
  // x = 2^-130 is subnormal, each x·w = 2^-120 is not: 256 of them sum to 2^-112 kept;
  // read as 0 when flushed.
  const auto x = filled(size_t(kRows * kIn), std::ldexp(1.0f, -130));
  const auto w = filled(size_t(kOut * kIn), std::ldexp(1.0f, 10));
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    EXPECT_EQ(mismatches(run(x, w, threads, false), 0.0f), "");
    EXPECT_EQ(mismatches(run(x, w, threads, true), std::ldexp(1.0f, -112)), "");
  }
}

TEST(Denormals, TheCallersModeChangesNoBitAndComesBack) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(size_t(kRows * kIn)), w(size_t(kOut * kIn));
  for (float &v : x) v = d(rng);
  for (float &v : w) v = d(rng);
  const uint32_t before = _mm_getcsr();
  for (int threads : {1, 2})
    for (bool keep : {false, true}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (keep ? ", kept" : ", flushed"));
      const std::vector<float> nearest = run(x, w, threads, keep);
      // Round toward zero (MXCSR.RC = 11): sums of products of random values round
      // differently in most outputs if the kernels computed in it.
      const uint32_t towardZero = (before & ~0x6000u) | 0x6000u;
      _mm_setcsr(towardZero);
      const std::vector<float> underCallersMode = run(x, w, threads, keep);
      const uint32_t after = _mm_getcsr();
      _mm_setcsr(before);
      EXPECT_EQ(after & ~0x3Fu, towardZero & ~0x3Fu) << "the caller's control bits after the run"; // flags aside
      EXPECT_EQ(std::memcmp(nearest.data(), underCallersMode.data(), nearest.size() * 4), 0);
    }
}

TEST(Denormals, WeightsArePreparedTheSameInAnyCallersMode) {
  // fc1 then fc2 with nothing between: one GEMM of W2 · W1 (64 × 256, fewer weights than
  // the two), folded in double at load. W1 = k · 2^-140 (|k| <= 127) is subnormal, and so
  // is most of the fold.
  const std::string chain = "model m {\n  input x: [256]\n  fc1 = dense(512, bias=false)\n"
                            "  fc2 = dense(64, bias=false)\n}\n";
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> k(-127, 127);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(size_t(kRows * kIn)), w1(size_t(512 * kIn)), w2(size_t(64 * 512));
  for (float &v : x) v = d(rng);
  for (float &v : w1) v = std::ldexp(float(k(rng)), -140);
  for (float &v : w2) v = d(rng);
  const std::vector<Tensor> weights = {{"fc1.weight", 512, kIn, w1}, {"fc2.weight", 64, 512, w2}};
  const uint32_t flushing = _mm_getcsr() | 0x8040u; // FTZ and DAZ, as a TensorFlow host runs
  const std::vector<float> loadedPlain = run(chain, options(1, true), x, weights);
  const std::vector<float> loadedFlushing = run(chain, options(1, true), x, weights, flushing);
  size_t nonzero = 0;
  for (float y : loadedPlain) nonzero += y != 0 && std::isfinite(y);
  EXPECT_GT(nonzero, loadedPlain.size() / 2) << "kept: mostly not 0";
  EXPECT_EQ(std::memcmp(loadedPlain.data(), loadedFlushing.data(), loadedPlain.size() * 4), 0);
}

} // namespace
