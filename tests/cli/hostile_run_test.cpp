// The run path against hostile sizes and values (issue 14): the memory a run needs is
// summed and refused before it is taken (weights, packed panels, arena, input), raw and
// .npy inputs are checked against the model before their data is read, and NaN and
// infinity propagate through a run as IEEE says, the summary counting them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "NncProcess.h"

using namespace nnc_cli_test;

namespace {

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

std::string npyHeader(const std::string &shape) {
  std::string d = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  d.append((64 - (10 + d.size() + 1) % 64) % 64, ' ');
  d += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + char(d.size() & 0xff) + char(d.size() >> 8) + d;
}
std::string floats(const std::vector<float> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4);
}
// F32 tensors, in order, as a .safetensors file.
std::string safetensors(const std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>> &ts) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  std::string data;
  for (const auto &[name, t] : ts) {
    h[name] = {{"dtype", "F32"}, {"shape", t.first}, {"data_offsets", {data.size(), data.size() + 4 * t.second.size()}}};
    data += floats(t.second);
  }
  std::string text = h.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = char(uint64_t(text.size()) >> (8 * i) & 0xff);
  return len + text + data;
}

const char *kBig = "model big {\n  input x: [2]\n  dense(2147483648)\n}\n";
const char *kSmall = "model small {\n  input x: [2]\n  fc = dense(2)\n}\n";

TEST(HostileRun, WeightsTooLargeAreRefusedUpFrontWithTheBillAndTheLayer) {
  TempDir d;
  std::string model = d.write("big.nn", kBig), in = d.write("x.npy", npyHeader("(2, 2)") + floats({1, 2, 3, 4}));
  Result r = runNnc({model, "--run", in, "--random-weights", "5", "--batch", "2"}, 60);
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_LT(r.seconds, 10 * timeScale()) << "refused before anything was allocated";
  for (const char *part : {"model 'big' at batch 2 needs up to", "weights as f32:", "25,769,803,776 bytes",
                           "packed GEMM panels:", "activation arena:", "the largest layer is '0' (dense, line 3)",
                           "nothing was allocated", "--max-memory"})
    EXPECT_CONTAINS(r.err, part);
}

TEST(HostileRun, MaxMemoryIsTheLimitBothWays) {
  TempDir d;
  std::string digits = std::string(NNC_SOURCE_DIR) + "/examples/digits/";
  std::vector<std::string> run = {digits + "digits.nn", "--run", digits + "test_images_5.npy", "--weights",
                                  digits + "digits.safetensors"};
  auto with = [&](const std::string &limit) {
    auto args = run;
    args.insert(args.end(), {"--max-memory", limit});
    return runNnc(args, 60);
  };
  Result small = with("1000");
  EXPECT_EQ(small.exitCode, 1) << small.describe();
  EXPECT_CONTAINS(small.err, "more than the limit given (1,000 bytes");
  EXPECT_CONTAINS(small.err, "weight file, read whole:");
  EXPECT_CONTAINS(small.err, "the largest layer is 'fc1' (dense, line 8)");
  Result enough = with("1_000_000_000");
  EXPECT_EQ(enough.exitCode, 0) << enough.describe();
  EXPECT_CONTAINS(enough.out, "argmax per row: 7 6 3 7 7");
  Result bad = with("-5");
  EXPECT_EQ(bad.exitCode, 2) << bad.describe();
}

TEST(HostileRun, HugeNpyInputIsRefusedBeforeItsDataIsRead) {
  TempDir d;
  std::string digits = std::string(NNC_SOURCE_DIR) + "/examples/digits/";
  // A true header over a 32 GiB hole: the batch it sets needs more than any limit here.
  std::string in = d.write("huge.npy", npyHeader("(134217728, 64)"));
  std::filesystem::resize_file(in, 128 + (uint64_t(32) << 30));
  Result r = runNnc({digits + "digits.nn", "--run", in, "--weights", digits + "digits.safetensors",
                     "--max-memory", "1_000_000_000"}, 60);
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_LT(r.seconds, 10 * timeScale());
  EXPECT_CONTAINS(r.err, "at batch 134217728 needs up to");
  EXPECT_CONTAINS(r.err, "input:");
  // A header whose shape does not fit the model is refused on the header alone.
  std::string wrong = d.write("wrong.npy", npyHeader("(134217728, 63)"));
  std::filesystem::resize_file(wrong, 128 + uint64_t(134217728) * 63 * 4);
  Result w = runNnc({digits + "digits.nn", "--run", wrong, "--weights", digits + "digits.safetensors"}, 60);
  EXPECT_EQ(w.exitCode, 1) << w.describe();
  EXPECT_CONTAINS(w.err, "does not fit model");
}

TEST(HostileRun, HugeRawInputIsRefusedBeforeItIsRead) {
  TempDir d;
  std::string model = d.write("small.nn", kSmall);
  std::string in = d.write("in.raw", "");
  std::filesystem::resize_file(in, uint64_t(16) << 30);
  Result r = runNnc({model, "--run", in, "--random-weights", "1"}, 60);
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_LT(r.seconds, 10 * timeScale());
  EXPECT_CONTAINS(r.err, "raw input has 17179869184 bytes");
}

TEST(HostileRun, NaNAndInfinityPropagateAndAreCounted) {
  TempDir d;
  std::string model = d.write("small.nn", kSmall);
  const float nan = std::nanf(""), inf = INFINITY;
  // Weights: row 0 reads x[0] only, row 1 x[1] only.
  std::string w = d.write("w.safetensors", safetensors({{"fc.weight", {{2, 2}, {1, 0, 0, 1}}}, {"fc.bias", {{2}, {0, 0}}}}));
  std::string in = d.write("in.npy", npyHeader("(3, 2)") + floats({nan, 1, inf, 2, 3, 4}));
  Result r = runNnc({model, "--run", in, "--weights", w}, 60);
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  // NaN·1 = NaN; NaN·0 = NaN too (IEEE), so row 0 is NaN, NaN; inf·0 = NaN, inf·1 = inf.
  EXPECT_CONTAINS(r.out, "non-finite outputs: 4 of 6 (3 NaN, 1 infinite)");
  // As torch.argmax, a NaN is the largest (row 1 is inf, NaN); printed "nan", never "-nan".
  EXPECT_CONTAINS(r.out, "argmax per row: 0 1 1");
  EXPECT_CONTAINS(r.out, "[0] nan nan");
  EXPECT_EQ(r.out.find("-nan"), std::string::npos) << r.out;
  // NaN in the weights reaches every output of its row.
  std::string wn = d.write("wn.safetensors", safetensors({{"fc.weight", {{2, 2}, {nan, 0, 0, 1}}}, {"fc.bias", {{2}, {0, 0}}}}));
  std::string in2 = d.write("in2.npy", npyHeader("(2, 2)") + floats({1, 2, 3, 4}));
  Result n = runNnc({model, "--run", in2, "--weights", wn}, 60);
  EXPECT_EQ(n.exitCode, 0) << n.describe();
  EXPECT_CONTAINS(n.out, "non-finite outputs: 2 of 4 (2 NaN, 0 infinite)");
  // A finite run says nothing of it.
  Result f = runNnc({model, "--run", in2, "--weights", w}, 60);
  EXPECT_EQ(f.exitCode, 0) << f.describe();
  EXPECT_EQ(f.out.find("non-finite"), std::string::npos) << f.out;
}

// A weight its storage dtype cannot hold (inf as i8) is exit 1 naming the tensor and the
// element, whether the weights are packed before the run (a thread per CPU) or by the
// free CPUs while it runs (--threads 1: CompiledModel::setWeightsWhileRunning).
TEST(HostileRun, AWeightTheDtypeCannotHoldIsTheSameErrorWhileRunning) {
  TempDir d;
  std::string model = d.write("small.nn", kSmall);
  std::string w = d.write("w.safetensors",
                          safetensors({{"fc.weight", {{2, 2}, {1, 0, INFINITY, 1}}}, {"fc.bias", {{2}, {0, 0}}}}));
  std::string in = d.write("in.npy", npyHeader("(2, 2)") + floats({1, 2, 3, 4}));
  Result all = runNnc({model, "--run", in, "--weights", w, "--dtype", "i8"}, 60);
  EXPECT_EQ(all.exitCode, 1) << all.describe();
  EXPECT_CONTAINS(all.err, "weight [1, 0] is inf");
  Result one = runNnc({model, "--run", in, "--weights", w, "--dtype", "i8", "--threads", "1"}, 60);
  EXPECT_EQ(one.exitCode, 1) << one.describe();
  EXPECT_EQ(one.err, all.err);
  EXPECT_EQ(one.out, "");
}

// Where the kernels join tensors (attention's q, k and v; a gated MLP's gate and up) or
// reorder a conv's columns, the error still names the file's tensor and its own element:
// it said "a.{q,k,v}.weight: weight [5, 1]", a row k_proj does not have.
TEST(HostileRun, AWeightTheDtypeCannotHoldIsNamedAsTheFileHasIt) {
  TempDir d;
  std::string in = d.write("in.npy", npyHeader("(2, 4)") + floats({1, 2, 3, 4, 5, 6, 7, 8}));
  const std::string attention = d.write("a.nn", "model m {\n  input x: [2, 4]\n  a = attention(2, kv_heads=1)\n}\n");
  std::vector<float> q(16, 0.1f), kv(8, 0.1f), o(16, 0.1f), v(8, 0.1f);
  kv[1 * 4 + 2] = 1e6f; // k's [1, 2]: row 5 of the joined q|k|v
  std::string w = d.write("a.safetensors", safetensors({{"a.q.weight", {{4, 4}, q}},
                                                        {"a.k.weight", {{2, 4}, kv}},
                                                        {"a.v.weight", {{2, 4}, v}},
                                                        {"a.o.weight", {{4, 4}, o}}}));
  Result r = runNnc({attention, "--run", in, "--weights", w, "--dtype", "f16"}, 60);
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "a.k.weight: weight [1, 2] = 1000000 is beyond f16's range");
  // A conv's weight, whose kernel reads its columns tap by tap: [out, in, kh, kw] named.
  const std::string conv = d.write("c.nn", "model m {\n  input x: [2, 3, 3]\n  c = conv2d(2, 2, bias=false)\n}\n");
  std::vector<float> cw(16, 0.1f);
  cw[1 * 8 + 0 * 4 + 1 * 2 + 0] = INFINITY; // [1, 0, 1, 0]
  std::string wc = d.write("c.safetensors", safetensors({{"c.weight", {{2, 2, 2, 2}, cw}}}));
  std::string in3 = d.write("in3.npy", npyHeader("(2, 3, 3)") + floats(std::vector<float>(18, 1.0f)));
  Result c = runNnc({conv, "--run", in3, "--weights", wc, "--dtype", "f16"}, 60);
  EXPECT_EQ(c.exitCode, 1) << c.describe();
  EXPECT_CONTAINS(c.err, "c.weight: weight [1, 0, 1, 0] is inf, which f16 cannot store");
}

// A batchnorm folded into the conv before it makes W'[o, …] = W[o, …] · s[o]; a folded
// weight out of the dtype's range is named at the conv's own [out, in/groups, kh, kw]
// index, not at its row within a group's GEMM (it said "weight [2, 0]" here).
TEST(HostileRun, AFoldedWeightTheDtypeCannotHoldIsNamedAtTheConvsIndex) {
  TempDir d;
  const std::string model =
      d.write("c.nn", "model m {\n  input x: [4, 3, 3]\n  c = conv2d(4, kernel=2, groups=2, bias=false)\n  bn = batchnorm\n}\n");
  std::vector<float> cw(32, 0.5f), gamma(4, 1.0f), beta(4, 0.0f), mean(4, 0.0f), var(4, 1.0f);
  cw[3 * 8 + 0 * 4 + 0 * 2 + 1] = 3.0f; // [3, 0, 0, 1]: the second group's second row
  gamma[3] = 1e5f;              // 3 · 1e5 / sqrt(1 + eps) is beyond f16, 0.5 · 1e5 is not
  std::string w = d.write("c.safetensors", safetensors({{"c.weight", {{4, 2, 2, 2}, cw}},
                                                        {"bn.weight", {{4}, gamma}},
                                                        {"bn.bias", {{4}, beta}},
                                                        {"bn.running_mean", {{4}, mean}},
                                                        {"bn.running_var", {{4}, var}}}));
  std::string in = d.write("in.npy", npyHeader("(4, 3, 3)") + floats(std::vector<float>(36, 1.0f)));
  Result r = runNnc({model, "--run", in, "--weights", w, "--dtype", "f16"}, 60);
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "c.weight (batchnorm bn folded): weight [3, 0, 0, 1] = 299998.5 is beyond f16's range");
}

// Through a weight map, the file's own tensor and element too: renamed; k and v joined
// in one tensor stored [in, out] (`a.kv -> a.{k,v}.weight transposed`).
TEST(HostileRun, AWeightTheDtypeCannotHoldIsNamedThroughTheWeightMap) {
  TempDir d;
  std::string in = d.write("in.npy", npyHeader("(2, 4)") + floats({1, 2, 3, 4, 5, 6, 7, 8}));
  const std::string attention = d.write("a.nn", "model m {\n  input x: [2, 4]\n  a = attention(2, kv_heads=1)\n}\n");
  std::vector<float> q(16, 0.1f), o(16, 0.1f), kv(16, 0.1f);
  kv[2 * 4 + 3] = 1e6f; // the file's [2, 3]: v's [1, 2] once transposed and split
  std::string w = d.write("a.safetensors", safetensors({{"a.query", {{4, 4}, q}},
                                                        {"a.kv", {{4, 4}, kv}},
                                                        {"a.o.weight", {{4, 4}, o}}}));
  const std::string map = d.write("m.map", "a.query -> a.q.weight\na.kv -> a.{k,v}.weight transposed\n");
  Result r = runNnc({attention, "--run", in, "--weights", w, "--weight-map", map, "--dtype", "f16"}, 60);
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "a.v.weight: weight [1, 2] (the file's 'a.kv' [2, 3]) = 1000000 is beyond f16's range");
  q[3 * 4 + 1] = -1e6f;
  w = d.write("b.safetensors", safetensors({{"a.query", {{4, 4}, q}}, {"a.kv", {{4, 4}, std::vector<float>(16, 0.1f)}},
                                            {"a.o.weight", {{4, 4}, o}}}));
  Result renamed = runNnc({attention, "--run", in, "--weights", w, "--weight-map", map, "--dtype", "f16"}, 60);
  EXPECT_EQ(renamed.exitCode, 1) << renamed.describe();
  EXPECT_CONTAINS(renamed.err, "a.q.weight: weight [3, 1] (the file's 'a.query' [3, 1]) = -1000000 is beyond f16's range");
}

TEST(HostileRun, ReaderBugsFromIssue14AreCleanErrors) {
  TempDir d;
  std::string digits = std::string(NNC_SOURCE_DIR) + "/examples/digits/";
  auto run = [&](const std::string &weights) {
    return runNnc({digits + "digits.nn", "--run", digits + "test_images_5.npy", "--weights", weights}, 60);
  };
  Result big = run(d.write("r.safetensors", std::string("\x0b\0\0\0\0\0\0\0{\"a\":1e400}", 19)));
  EXPECT_EQ(big.exitCode, 1) << big.describe();
  EXPECT_CONTAINS(big.err, "r.safetensors: the 11-byte header is not valid JSON: a number too large for a double");
  std::string nested = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = char(uint64_t(nested.size()) >> (8 * i) & 0xff);
  Result deep = run(d.write("n.safetensors", len + nested));
  ASSERT_TRUE(deep.clean()) << deep.describe();
  EXPECT_EQ(deep.exitCode, 1) << deep.describe();
  EXPECT_CONTAINS(deep.err, "n.safetensors: the header nests JSON more than 64 levels deep");
  EXPECT_LT(deep.err.size(), 1000u);
}

TEST(HostileRun, EveryMessageIsBounded) {
  TempDir d;
  // A megabyte name: the unknown-name error quotes it whole only up to the bound.
  std::string model = d.write("long.nn", "model m {\n  input x: [4]\n  dense(" + std::string(1 << 20, 'q') + ")\n}\n");
  Result r = runNnc({model, "--check"}, 60);
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_CONTAINS(r.err, "unknown name 'qqqq");
  EXPECT_CONTAINS(r.err, "message cut");
  EXPECT_LT(r.err.size(), 12000u);
}

} // namespace
