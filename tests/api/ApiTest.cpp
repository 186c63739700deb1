// The public API (include/nnc/nnc.h), linked as a host application links it
// (libnnc.so): errors with located diagnostics, weights from a file and from memory,
// run() from many threads at once equal to a serial run, the report's figures, a model
// that reports but cannot run yet, and a library that never prints.
#include <gtest/gtest.h>

#include <atomic>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <thread>

#include "nnc/nnc.h"

namespace {

std::string source(const std::string &relative) { return std::string(NNC_SOURCE_DIR) + "/" + relative; }

std::vector<float> randomInput(const nnc::Model &m, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(size_t(m.inputElements()));
  for (float &v : x) v = u(rng);
  return x;
}

TEST(Api, ErrorsCarryLocatedDiagnostics) {
  try {
    nnc::Model::fromSource("model m {\n  input x: [4]\n  desne(3)\n}\n");
    FAIL() << "no error";
  } catch (const nnc::Error &e) {
    ASSERT_FALSE(e.diagnostics().empty());
    const nnc::Diagnostic &d = e.diagnostics()[0];
    EXPECT_EQ(d.severity, nnc::Diagnostic::Severity::Error);
    EXPECT_EQ(d.line, 3);
    EXPECT_EQ(d.column, 3);
    EXPECT_NE(d.message.find("desne"), std::string::npos) << d.message;
    EXPECT_NE(std::string(e.what()).find("<source>:3:3: error: unknown layer 'desne'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nnc::Model::fromFile("/no/such/model.nn"), nnc::Error);
  nnc::Options bad;
  bad.dtype = "f64";
  EXPECT_THROW(nnc::Model::fromSource("model m { input x: [4] dense(3) }", bad), nnc::Error);
}

// An Error's what() and its diagnostics' messages are cut to 4,096 bytes as the CLI's
// text is (docs/errors.md): a 100 KB misspelt name made a 100 KB what().
TEST(Api, ErrorsAreBoundedHoweverLongWhatTheyQuote) {
  const std::string name = "desne" + std::string(100'000, 'e');
  try {
    nnc::Model::fromSource("model m {\n  input x: [4]\n  " + name + "(3)\n}\n");
    FAIL() << "no error";
  } catch (const nnc::Error &e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    const std::string &message = e.diagnostics()[0].message;
    EXPECT_LE(message.size(), 4096u) << message.size();
    EXPECT_NE(message.find("unknown layer 'desneeee"), std::string::npos) << message.substr(0, 200);
    EXPECT_NE(message.find("(message cut: 100,"), std::string::npos) << message.substr(4000);
    EXPECT_LE(std::string(e.what()).size(), 4096u);
  }
  nnc::Options set; // an error that is not a diagnostic: a --set name quoted back
  set.set[name] = 1;
  try {
    nnc::Model::fromSource("model m {\n  input x: [4]\n  dense(3)\n}\n", set);
    FAIL() << "no error";
  } catch (const nnc::Error &e) {
    EXPECT_LE(std::string(e.what()).size(), 4096u);
    EXPECT_NE(std::string(e.what()).find("message cut"), std::string::npos) << std::string(e.what()).substr(0, 200);
  }
}

// `model` with random weights 5 on x: not `want` bit for bit (really quantised), and
// within 5 % of its largest magnitude.
void expectQuantisedNear(nnc::Model &model, const std::vector<float> &x, const std::vector<float> &want) {
  model.randomWeights(5);
  std::vector<float> got(want.size());
  model.run(x.data(), got.data());
  double maxDiff = 0, maxRef = 0;
  for (size_t i = 0; i < got.size(); ++i)
    maxDiff = std::max(maxDiff, double(std::fabs(got[i] - want[i]))), maxRef = std::max(maxRef, double(std::fabs(want[i])));
  EXPECT_GT(maxDiff, 0.0);
  EXPECT_LT(maxDiff, 0.05 * maxRef);
}

// Options::activations as --activations: i8 activations run near the f32 output where
// the kernel row has vpdpbusd (else a clear Error); bad values and dtypes throw.
TEST(Api, LowPrecisionActivations) {
  const std::string src = "model m {\n  input x: [64]\n  fc1 = dense(48) relu\n  fc2 = dense(16)\n}\n";
  nnc::Options o;
  o.batch = 4;
  o.kernelCacheDir = "";
  nnc::Model f32 = nnc::Model::fromSource(src, o);
  f32.randomWeights(5);
  const std::vector<float> x = randomInput(f32, 9);
  std::vector<float> want(size_t(f32.outputElements()));
  f32.run(x.data(), want.data());
  o.activations = "i8";
  try {
    nnc::Model i8 = nnc::Model::fromSource(src, o);
    expectQuantisedNear(i8, x, want); // i8 weights and activations: about 1 % here
  } catch (const nnc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("i8 activations need"), std::string::npos) << e.what();
  }
  // i4 weights under i8 activations: near the same i4 weights under f32 activations
  // (only the activations' rounding differs)
  nnc::Options i4Options = o;
  i4Options.activations = "";
  i4Options.dtype = "i4";
  nnc::Model i4 = nnc::Model::fromSource(src, i4Options);
  i4.randomWeights(5);
  i4.run(x.data(), want.data());
  i4Options.activations = "i8";
  try {
    nnc::Model i4xi8 = nnc::Model::fromSource(src, i4Options);
    expectQuantisedNear(i4xi8, x, want);
  } catch (const nnc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("i8 activations need"), std::string::npos) << e.what();
  }
  nnc::Options bad = o;
  bad.activations = "f16";
  EXPECT_THROW(nnc::Model::fromSource(src, bad), nnc::Error);
  bad.activations = "bf16";
  bad.dtype = "i8";
  EXPECT_THROW(nnc::Model::fromSource(src, bad), nnc::Error);
}

TEST(Api, ThreadsAtOnceEqualASerialRun) {
  // Large enough that each call splits its GEMMs over the model's 2-thread pool, so
  // concurrent calls also contend for the pool.
  nnc::Options o;
  o.batch = 32;
  o.threads = 2;
  o.kernelCacheDir = "";
  nnc::Model m = nnc::Model::fromFile(source("examples/seeds/mnist.nn"), o);
  m.randomWeights(3);
  EXPECT_EQ(m.inputShape(), (std::vector<int64_t>{32, 784}));
  const int kThreads = 8, kCalls = 40;
  std::vector<std::vector<float>> inputs, serial;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(randomInput(m, unsigned(t)));
    serial.emplace_back(size_t(m.outputElements()));
    m.run(inputs[size_t(t)].data(), serial[size_t(t)].data());
  }
  std::vector<std::vector<float>> got(kThreads, std::vector<float>(size_t(m.outputElements())));
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        m.run(inputs[size_t(t)].data(), got[size_t(t)].data());
        mismatches[size_t(t)] += got[size_t(t)] != serial[size_t(t)];
      }
    });
  for (auto &th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
}

// loadWeights and randomWeights while other threads run(): every run sees one set of
// weights, the old or the new, never a mix (a reload under runs crashed in the kernels,
// or threw an internal error, and outputs matched neither set).
TEST(Api, WeightsReloadedWhileThreadsRun) {
  nnc::Options o;
  o.batch = 8;
  o.threads = 1;
  o.kernelCacheDir = "";
  nnc::Model m = nnc::Model::fromFile(source("examples/digits/digits.nn"), o);
  const std::vector<float> in = randomInput(m, 5);
  std::vector<float> a(size_t(m.outputElements())), b(a.size());
  m.loadWeights(source("examples/digits/digits.safetensors"));
  m.run(in.data(), a.data());
  m.randomWeights(9);
  m.run(in.data(), b.data());
  ASSERT_NE(a, b);
  std::atomic<bool> done{false};
  std::vector<int> neither(2, 0), runs(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> got(a.size());
      while (!done) {
        m.run(in.data(), got.data());
        neither[size_t(t)] += got != a && got != b;
        ++runs[size_t(t)];
      }
    });
  for (int i = 0; i < 40; ++i) {
    if (i % 2) m.randomWeights(9);
    else m.loadWeights(source("examples/digits/digits.safetensors"));
  }
  done = true;
  for (auto &th : threads) th.join();
  for (int t = 0; t < 2; ++t) {
    EXPECT_GT(runs[size_t(t)], 0) << "thread " << t;
    EXPECT_EQ(neither[size_t(t)], 0) << "thread " << t << ": runs that saw neither set of weights";
  }
}

// runStackBytes: kernels keep their buffers in their scratch, not on the stack, so a run
// takes the 64 KiB for the runtime's own frames and little more: the MLP in f32, and
// layers whose kernels widen f16 panels (256 KiB a panel) or, for i8 weights, convert
// chunks of rows of A into digits (up to 1 MiB a chunk) where the host multiplies bytes
// (KernelStack.h).
TEST(Api, RunStackBytesIsTheDeepestKernelsFramesAndTheRuntimes) {
  nnc::Options o;
  o.kernelCacheDir = "";
  const size_t runtimeFrames = size_t(64) << 10;
  nnc::Model mlp = nnc::Model::fromFile(source("examples/seeds/mnist.nn"), o);
  EXPECT_GE(mlp.runStackBytes(), runtimeFrames);
  EXPECT_LT(mlp.runStackBytes(), runtimeFrames + (size_t(64) << 10));
  o.batch = 96;
  nnc::Model wide = nnc::Model::fromSource("model m { input x: [2048]\n dense(256, dtype=f16) }", o);
  EXPECT_GE(wide.runStackBytes(), runtimeFrames);
  EXPECT_LT(wide.runStackBytes(), runtimeFrames + (size_t(64) << 10));
  nnc::Model bytes = nnc::Model::fromSource("model m { input x: [8192]\n dense(256, dtype=i8) }", o);
  EXPECT_LT(bytes.runStackBytes(), runtimeFrames + (size_t(64) << 10));
}

// Options::weightsWhileRunning on one thread (a host with another CPU): loadWeights
// returns before the weights are packed, and the first runs, from 4 threads at once,
// wait for them and pack the next ones meanwhile; every output is that of a model that
// packed first. A weight i8 cannot hold is then the Error of the run, with the message
// loadWeights gives without the option.
TEST(Api, WeightsPackedWhileRunsOnThreadsAtOnce) {
  nnc::Options o;
  o.batch = 4;
  o.threads = 1;
  o.dtype = "i4";
  o.kernelCacheDir = "";
  nnc::Model first = nnc::Model::fromFile(source("examples/seeds/mnist.nn"), o);
  first.randomWeights(5);
  const std::vector<float> x = randomInput(first, 11);
  std::vector<float> want(size_t(first.outputElements()));
  first.run(x.data(), want.data());
  o.weightsWhileRunning = true;
  nnc::Model during = nnc::Model::fromFile(source("examples/seeds/mnist.nn"), o);
  during.randomWeights(5);
  std::vector<std::vector<float>> got(4, std::vector<float>(want.size()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { during.run(x.data(), got[t].data()); });
  for (auto &th : threads) th.join();
  for (size_t t = 0; t < got.size(); ++t) EXPECT_EQ(got[t], want) << "thread " << t;

  // fc2.weight[0][0] = inf (digits.safetensors: an 8-byte length, the header, then fc2.weight
  // at data offset 16768) under i8.
  std::ifstream f(source("examples/digits/digits.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  const uint64_t header = uint64_t(uint8_t(bytes[0])) | uint64_t(uint8_t(bytes[1])) << 8;
  const float inf = INFINITY;
  std::memcpy(&bytes[8 + header + 16768], &inf, sizeof inf);
  nnc::Options i8;
  i8.batch = 2;
  i8.threads = 1;
  i8.dtype = "i8";
  i8.kernelCacheDir = "";
  std::string expected;
  try {
    nnc::Model::fromFile(source("examples/digits/digits.nn"), i8).loadWeights(bytes.data(), bytes.size());
    ADD_FAILURE() << "an inf loaded as i8";
  } catch (const nnc::Error &e) {
    expected = e.what();
  }
  EXPECT_NE(expected.find("fc2.weight"), std::string::npos) << expected;
  i8.weightsWhileRunning = true;
  nnc::Model bad = nnc::Model::fromFile(source("examples/digits/digits.nn"), i8);
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: no CPU left free to pack while running";
  bad.loadWeights(bytes.data(), bytes.size());
  std::vector<float> in(size_t(bad.inputElements()), 0.5f), out(size_t(bad.outputElements()));
  try {
    bad.run(in.data(), out.data());
    ADD_FAILURE() << "the run read a weight that was never packed";
  } catch (const nnc::Error &e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
}

TEST(Api, WeightsFromMemoryEqualWeightsFromTheFile) {
  nnc::Options o;
  o.kernelCacheDir = "";
  nnc::Model a = nnc::Model::fromFile(source("examples/digits/digits.nn"), o);
  nnc::Model b = nnc::Model::fromFile(source("examples/digits/digits.nn"), o);
  a.loadWeights(source("examples/digits/digits.safetensors"));
  std::ifstream f(source("examples/digits/digits.safetensors"), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
  b.loadWeights(bytes.data(), bytes.size());
  auto x = randomInput(a, 7);
  std::vector<float> ya(size_t(a.outputElements())), yb(ya.size());
  a.run(x.data(), ya.data());
  b.run(x.data(), yb.data());
  EXPECT_EQ(ya, yb);
  EXPECT_THROW(b.loadWeights(bytes.data(), 12), nnc::Error); // truncated: a clear error
  b.run(x.data(), yb.data()); // a reload that throws leaves the weights it had (docs/api.md)
  EXPECT_EQ(ya, yb);
}

// A WeightMap is a value: a moved-from one is still the map it was (it dereferenced a
// null pointer), and apply() over the length limit is an Error.
TEST(Api, WeightMapsMovedFromStayUsable) {
  nnc::WeightMap a = nnc::WeightMap::fromText("fc* -> layer*\n");
  nnc::WeightMap b = std::move(a);
  EXPECT_EQ(a.size(), 1u); // NOLINT(bugprone-use-after-move): the contract under test
  EXPECT_EQ(a.apply("fc1.weight"), "layer1.weight");
  EXPECT_EQ(b.apply("fc1.weight"), "layer1.weight");
  nnc::WeightMap c;
  c = std::move(b);
  EXPECT_EQ(b.size(), 1u); // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.size(), 1u);
  const std::string longer(200, 'x');
  nnc::WeightMap grow = nnc::WeightMap::fromText("* -> *" + longer + "\n* -> *" + longer + "\n");
  EXPECT_THROW(grow.apply("ab"), nnc::Error);
}

// Sizes and pointers the caller got wrong: a quantGroup near 2^63 crashed in the
// packing, a size of 2^63 or more read as negative, null pointers crashed in the library.
TEST(Api, CallerMistakesAreErrors) {
  nnc::Options o;
  o.kernelCacheDir = "";
  o.dtype = "i4";
  o.quantGroup = INT64_MAX;
  EXPECT_THROW(nnc::Model::fromFile(source("examples/digits/digits.nn"), o), nnc::Error);
  o.quantGroup = int64_t(1) << 20; // the largest allowed: runs
  nnc::Model m = nnc::Model::fromFile(source("examples/digits/digits.nn"), o);
  EXPECT_THROW(m.loadWeights(nullptr, 100), nnc::Error);
  try {
    m.loadWeights("x", SIZE_MAX);
    ADD_FAILURE() << "no error";
  } catch (const nnc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("more than any weights file"), std::string::npos) << e.what();
  }
  m.randomWeights(1);
  std::vector<float> x(size_t(m.inputElements())), y(size_t(m.outputElements()));
  EXPECT_THROW(m.run(static_cast<const float *>(nullptr), y.data()), nnc::Error);
  EXPECT_THROW(m.run(x.data(), nullptr), nnc::Error);
  m.run(x.data(), y.data());
  // A moved-from Model may only be destroyed or assigned to; any other call is an Error
  // naming that (it followed a null pointer).
  nnc::Model moved = std::move(m);
  const auto movedError = [](const std::function<void()> &f) {
    try {
      f();
    } catch (const nnc::Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string says = "this Model was moved from: a moved-from Model may only be destroyed or assigned to";
  EXPECT_EQ(movedError([&] { m.run(x.data(), y.data()); }), says);
  EXPECT_EQ(movedError([&] { m.report(); }), says);
  EXPECT_EQ(movedError([&] { m.randomWeights(1); }), says);
  EXPECT_EQ(movedError([&] { m.outputShape(); }), says);
  moved.run(x.data(), y.data());
  m = std::move(moved); // assigned to: usable again
  m.run(x.data(), y.data());
}

TEST(Api, ReportHasThePagesFigures) {
  nnc::Options o;
  o.batch = 64;
  nnc::Report r = nnc::Model::fromFile(source("examples/seeds/mnist.nn"), o).report();
  EXPECT_EQ(r.params, 235146);
  EXPECT_EQ(r.macs, 64 * 234752);
  EXPECT_EQ(r.weight_bytes_stored, 940584);
  ASSERT_EQ(r.layers.size(), 5u);
  EXPECT_EQ(r.layers[0].name, "fc1");
  EXPECT_EQ(r.layers[0].op, "dense");
  EXPECT_EQ(r.layers[0].params, 200960);
  EXPECT_EQ(r.layers[0].outputShape, (std::vector<int64_t>{64, 256}));
  EXPECT_GT(r.runtime_arena_bytes, 0);
}

TEST(Api, ReportsWithoutWeightsAndRunsDepthwiseInF16) {
  nnc::Model big = nnc::Model::fromFile(source("examples/seeds/llama_7b.nn"), nnc::Options{});
  EXPECT_EQ(big.report().params, 6738415616LL);
  EXPECT_TRUE(big.tokenInput());
  // A depthwise conv stored as f16 runs (its taps widened in the kernel) near its f32 self.
  const std::string src = "model m {\n input x: [2, 4, 4]\n fc = depthwise(3, pad=1, dtype=DT)\n}";
  auto run = [&](const std::string &dtype) {
    std::string text = src;
    text.replace(text.find("DT"), 2, dtype);
    nnc::Model m = nnc::Model::fromSource(text, nnc::Options{});
    EXPECT_EQ(m.report().params, 20);
    m.randomWeights(1);
    std::vector<float> x(size_t(m.inputElements()), 0.5f), y(size_t(m.outputElements()));
    m.run(x.data(), y.data());
    return y;
  };
  const std::vector<float> f32 = run("f32"), f16 = run("f16");
  double maxDiff = 0, maxRef = 0;
  for (size_t i = 0; i < f32.size(); ++i)
    maxDiff = std::max(maxDiff, double(std::fabs(f16[i] - f32[i]))), maxRef = std::max(maxRef, double(std::fabs(f32[i])));
  EXPECT_GT(maxDiff, 0.0);
  EXPECT_LT(maxDiff, 1e-3 * maxRef);
}

// Token ids through run(const int32_t*): the same ids give the same logits in any batch
// row; an id outside the vocabulary is an Error naming the row, the position and the id.
TEST(Api, TokenModelRunsFromInt32Ids) {
  nnc::Options o;
  o.batch = 2;
  o.threads = 2;
  nnc::Model m = nnc::Model::fromSource("model t {\n input ids: i32[4]\n tok = embedding(12, 8)\n"
                                        " pos_embedding(4)\n residual { rmsnorm gated_mlp(16) }\n"
                                        " dense(12, bias=false, tie=tok)\n}",
                                        o);
  ASSERT_TRUE(m.tokenInput());
  m.randomWeights(7);
  std::vector<int32_t> ids = {3, 1, 4, 1, 3, 1, 4, 1};
  std::vector<float> out(size_t(m.outputElements()));
  m.run(ids.data(), out.data());
  for (size_t i = 0; i < out.size() / 2; ++i) // equal up to the GEMM tiles' summation order
    EXPECT_NEAR(out[i], out[i + out.size() / 2], 1e-5 * std::max(1.0f, std::fabs(out[i]))) << i;
  std::vector<float> x(size_t(m.inputElements()));
  EXPECT_THROW(m.run(x.data(), out.data()), nnc::Error); // f32 data for a token model
  ids[6] = 12;
  try {
    m.run(ids.data(), out.data());
    FAIL() << "no error";
  } catch (const nnc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("token id 12 at batch row 1, position 2 is outside the vocabulary [0, 12)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Api, NeverPrints) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  try {
    nnc::Model::fromSource("model m {\n input x: [4]\n dense(3) dense(2)\n}"); // warns: affine chain
    nnc::Model::fromSource("model m { input x: [4] desne(3) }");
  } catch (const nnc::Error &) {
  }
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// The program's warnings reach Options::onWarning with their position (they were
// dropped); a callback that throws ends the call with an Error that says so (it read as
// an internal error of nnc's).
TEST(Api, WarningsGoToOnWarning) {
  std::vector<std::string> said;
  nnc::Options o;
  o.kernelCacheDir = "";
  o.onWarning = [&](const std::string &w) { said.push_back(w); };
  nnc::Model::fromSource("model m {\n input x: [4]\n dense(3) dense(2)\n}", o); // an affine chain
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind("<source>:3:", 0), 0u) << said[0];
  EXPECT_NE(said[0].find(": warning: "), std::string::npos) << said[0];
  o.onWarning = [](const std::string &) { throw std::runtime_error("host refuses"); };
  try {
    nnc::Model::fromSource("model m {\n input x: [4]\n dense(3) dense(2)\n}", o);
    FAIL() << "no error";
  } catch (const nnc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("Options::onWarning threw on the warning"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(": host refuses"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("internal error"), std::string::npos) << e.what();
  }
}

} // namespace

namespace {
TEST(Api, ModelsCompiledOnSeveralThreadsAtOnce) {
  const int kThreads = 4;
  std::vector<std::vector<float>> outputs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      nnc::Options o;
      o.threads = 1;
      o.kernelCacheDir = "";
      nnc::Model m = nnc::Model::fromFile(source("examples/digits/digits.nn"), o);
      m.loadWeights(source("examples/digits/digits.safetensors"));
      std::vector<float> x(size_t(m.inputElements()), 0.25f);
      outputs[size_t(t)].resize(size_t(m.outputElements()));
      m.run(x.data(), outputs[size_t(t)].data());
    });
  for (auto &th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(outputs[size_t(t)], outputs[0]);
}
} // namespace
