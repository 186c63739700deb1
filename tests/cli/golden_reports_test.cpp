// Golden tests for the worked figures of the course pages (shared/reference/
// seed_numbers.md). Each test runs the built `nnc` on one examples/seeds/*.nn file,
// parses `--format json`, and checks the page's figures digit for digit. Where a page
// rounds ("≈ 61 M", "30.4"), the test rounds the exact report value the same way and
// compares the printed digits, so a wrong count cannot hide inside a tolerance.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "NncProcess.h" // timeScale()

namespace {

using nlohmann::json;

// ---------------------------------------------------------------- running nnc

struct NncRun {
  int exitCode = -1;
  std::string out;  // stdout and stderr, interleaved
  double seconds = 0;
};

std::string examplePath(const std::string& name) {
  return std::string(NNC_SOURCE_DIR) + "/examples/seeds/" + name;
}

// Runs `nnc examples/seeds/EXAMPLE ARGS` and captures its output.
NncRun runNnc(const std::string& example, const std::string& args) {
  std::string cmd = std::string("'") + NNC_BINARY + "' '" + examplePath(example) + "' " + args + " 2>&1";
  NncRun r;
  auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[65536];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, got);
  int status = pclose(pipe);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The JSON report of an example; fails the test (and returns null) on a bad exit or bad JSON.
json jsonReport(const std::string& example, const std::string& args = "") {
  NncRun r = runNnc(example, "--format json " + args);
  EXPECT_EQ(r.exitCode, 0) << example << " " << args << ":\n" << r.out;
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << example << " " << args << ": not JSON:\n" << r.out;
  return j;
}

std::string textReport(const std::string& example, const std::string& args = "") {
  NncRun r = runNnc(example, args);
  EXPECT_EQ(r.exitCode, 0) << example << " " << args << ":\n" << r.out;
  return r.out;
}

// ---------------------------------------------------------------- reading reports

const json& layer(const json& report, const std::string& name) {
  static const json missing;
  for (const json& l : report.at("layers"))
    if (l.at("name") == name) return l;
  ADD_FAILURE() << "no layer named '" << name << "' in the report";
  return missing;
}

int64_t i64(const json& v) { return v.is_number() ? v.get<int64_t>() : -1; }

// Sum of KEY over the layers whose name ends with SUFFIX (e.g. ".feed_forward").
int64_t sumOverLayers(const json& report, const std::string& suffix, const std::string& key) {
  int64_t sum = 0;
  for (const json& l : report.at("layers")) {
    std::string n = l.at("name");
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      sum += i64(l.at(key));
  }
  return sum;
}

// A value printed the way the page prints it: fixed, DIGITS after the point.
std::string rounded(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// The page-000 convention of checking one weighted dense layer: params and MACs.
void expectDense(const json& report, const std::string& name, int64_t params, int64_t macsPerExample) {
  const json& l = layer(report, name);
  if (l.is_null()) return;
  EXPECT_EQ(i64(l.at("params")), params) << name;
  EXPECT_EQ(i64(l.at("macs_per_example")), macsPerExample) << name;
  EXPECT_EQ(i64(l.at("macs")), macsPerExample * i64(report.at("batch"))) << name;
}

// weight_bytes at every dtype follow from the parameter count (i4 rounds up a half byte).
void expectWeightBytes(const json& report, int64_t params) {
  const json& wb = report.at("totals").at("weight_bytes");
  EXPECT_EQ(i64(wb.at("f32")), params * 4);
  EXPECT_EQ(i64(wb.at("f16")), params * 2);
  EXPECT_EQ(i64(wb.at("bf16")), params * 2);
  EXPECT_EQ(i64(wb.at("i8")), params);
  EXPECT_EQ(i64(wb.at("i4")), (params + 1) / 2);
}

// ---------------------------------------------------------------- page 000

TEST(GoldenReports, Tiny_4_3_2_Batch2) {
  json j = jsonReport("tiny_4_3_2.nn");  // the model's own default: batch = 2
  EXPECT_EQ(i64(j.at("batch")), 2);
  EXPECT_EQ(i64(j["totals"]["params"]), 23);  // 15 + 8
  expectDense(j, "0", 15, 12);                // 4·3 + 3
  expectDense(j, "2", 8, 6);                  // 3·2 + 2
  EXPECT_EQ(i64(j["totals"]["macs_per_example"]), 18);
  EXPECT_EQ(i64(j["totals"]["macs"]), 36);
  EXPECT_EQ(j["layers"][2]["output_shape"], json::array({2, 2}));
}

TEST(GoldenReports, Mnist_784_128_10) {
  json j = jsonReport("mnist_128.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 101770);  // 100,480 + 1,290
  expectDense(j, "fc1", 100480, 100352);
  expectDense(j, "fc2", 1290, 1280);
  EXPECT_EQ(i64(j["totals"]["weights"]), 101632);
  EXPECT_EQ(i64(j["totals"]["macs_per_example"]), 101632);
  EXPECT_EQ(i64(j["totals"]["macs"]), 101632);

  json b = jsonReport("mnist_128.nn", "--batch 64");
  EXPECT_EQ(i64(b.at("batch")), 64);
  EXPECT_EQ(i64(b["totals"]["macs_per_example"]), 101632);
  EXPECT_EQ(i64(b["totals"]["macs"]), 6504448);  // 64 × 101,632
  EXPECT_EQ(i64(b["totals"]["flops"]), 2 * 6504448);
  EXPECT_EQ(i64(b["totals"]["params"]), 101770);  // whatever the batch
}

// ---------------------------------------------------------------- page 002

TEST(GoldenReports, Mnist_784_256_128_10) {
  json j = jsonReport("mnist.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 235146);
  expectDense(j, "fc1", 200960, 200704);
  expectDense(j, "fc2", 32896, 32768);
  expectDense(j, "fc3", 1290, 1280);
  expectWeightBytes(j, 235146);
  // "235,146 × 4 bytes ≈ 940 KB": the page truncates 940,584 B to whole KB.
  EXPECT_EQ(i64(j["totals"]["weight_bytes"]["f32"]), 940584);
  EXPECT_EQ(i64(j["totals"]["weight_bytes"]["f32"]) / 1000, 940);
}

TEST(GoldenReports, Mnist_784_Hidden_10) {
  json a = jsonReport("mnist_hidden.nn");
  EXPECT_EQ(i64(a["totals"]["params"]), 203530);
  expectDense(a, "fc1", 200960, 200704);
  expectDense(a, "fc2", 2570, 2560);
  json b = jsonReport("mnist_hidden.nn", "--set hidden=512");
  EXPECT_EQ(i64(b["totals"]["params"]), 407050);
  expectDense(b, "fc1", 401920, 401408);
  expectDense(b, "fc2", 5130, 5120);
}

TEST(GoldenReports, Linear_100_10) {
  json j = jsonReport("linear_100_10.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 1010);
  expectDense(j, "0", 1010, 1000);
}

// ---------------------------------------------------------------- page 003

TEST(GoldenReports, Tabular_20_64_64_1) {
  json j = jsonReport("tabular.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 5569);
  expectDense(j, "0", 1344, 1280);
  expectDense(j, "2", 4160, 4096);
  expectDense(j, "4", 65, 64);
  expectWeightBytes(j, 5569);
  EXPECT_EQ(i64(j["totals"]["weight_bytes"]["f32"]), 22276);  // "about 22 KB"
  EXPECT_EQ(rounded(22276 / 1e3, 0), "22");

  json w = jsonReport("tabular.nn", "--set hidden=128");
  EXPECT_EQ(i64(w["totals"]["params"]), 11009);
  expectDense(w, "0", 2688, 2560);
  expectDense(w, "2", 8256, 8192);
  expectDense(w, "4", 65, 64);
  EXPECT_EQ(rounded(11009.0 / 5569.0, 2), "1.98");  // "a factor of 1.98"
}

// The training bill: weights + gradients (same size) + optimizer state + kept activations.
TEST(GoldenReports, Tabular_TrainingEstimateAddsUp) {
  for (const char* batch : {"1", "64"}) {
    json j = jsonReport("tabular.nn", std::string("--batch ") + batch);
    const json& m = j.at("memory");
    const int64_t weights = i64(j["totals"]["weight_bytes"]["f32"]);
    EXPECT_EQ(weights, 22276);
    EXPECT_EQ(i64(m["activation_training_bytes"]), i64(m["input_bytes"]) + i64(m["activation_bytes_all_layers"]));
    ASSERT_EQ(m.at("training").size(), 3u);
    const int64_t optimizerCopies[3] = {0, 1, 2};  // SGD, SGD with momentum, Adam
    const char* names[3] = {"SGD", "SGD with momentum", "Adam"};
    for (int k = 0; k < 3; ++k) {
      const json& t = m["training"][k];
      EXPECT_EQ(t.at("optimizer"), names[k]);
      EXPECT_EQ(i64(t["weights_bytes"]), weights);
      EXPECT_EQ(i64(t["gradient_bytes"]), weights);
      EXPECT_EQ(i64(t["optimizer_bytes"]), optimizerCopies[k] * weights);
      EXPECT_EQ(i64(t["activation_bytes"]), i64(m["activation_training_bytes"]));
      EXPECT_EQ(i64(t["total_bytes"]), i64(t["weights_bytes"]) + i64(t["gradient_bytes"]) +
                                           i64(t["optimizer_bytes"]) + i64(t["activation_bytes"]));
    }
  }
  // Activations scale with the batch; the weights' share of the bill does not.
  json one = jsonReport("tabular.nn"), many = jsonReport("tabular.nn", "--batch 64");
  EXPECT_EQ(i64(many["memory"]["activation_training_bytes"]), 64 * i64(one["memory"]["activation_training_bytes"]));
}

// ---------------------------------------------------------------- page 004

TEST(GoldenReports, NoBias_5_3) {
  json j = jsonReport("no_bias_5_3.nn");
  EXPECT_EQ(i64(j["totals"]["weights"]), 15);
  EXPECT_EQ(i64(j["totals"]["params"]), 15);
  EXPECT_EQ(i64(j["totals"]["biases"]), 0);
}

TEST(GoldenReports, AlexNetConv3) {
  json j = jsonReport("alexnet_conv3.nn");
  EXPECT_EQ(i64(j["totals"]["weights"]), 884736);  // 384 · 256 · 3 · 3
  EXPECT_EQ(i64(j["totals"]["params"]), 884736);
  EXPECT_EQ(layer(j, "conv3")["output_shape"], json::array({1, 384, 13, 13}));
  EXPECT_EQ(i64(layer(j, "conv3")["macs"]), 884736LL * 13 * 13);
  EXPECT_EQ(rounded(i64(j["totals"]["weight_bytes"]["i8"]) / 1e3, 1), "884.7");   // KB at 8 bits
  EXPECT_EQ(rounded(i64(j["totals"]["weight_bytes"]["f32"]) / 1e3, 1), "3538.9");  // KB at 32 bits
}

// The page ignores biases ("this lecture keeps that convention throughout"), so the
// shares are of weights; the bias-inclusive totals round to the same figures.
TEST(GoldenReports, AlexNet) {
  json j = jsonReport("alexnet.nn");
  struct Row { const char* name; int64_t weights, params, macs; std::vector<int> shape; };
  const Row rows[] = {
      {"conv1", 34848, 34944, 105415200, {1, 96, 55, 55}},     // 96·3·11·11, 55×55 out
      {"conv2", 307200, 307456, 223948800, {1, 256, 27, 27}},  // 256·(96/2)·5·5
      {"conv3", 884736, 885120, 149520384, {1, 384, 13, 13}},  // 384·256·3·3
      {"conv4", 663552, 663936, 112140288, {1, 384, 13, 13}},  // 384·(384/2)·3·3
      {"conv5", 442368, 442624, 74760192, {1, 256, 13, 13}},   // 256·(384/2)·3·3
      {"fc6", 37748736, 37752832, 37748736, {1, 4096}},        // 9,216 · 4,096
      {"fc7", 16777216, 16781312, 16777216, {1, 4096}},
      {"fc8", 4096000, 4097000, 4096000, {1, 1000}},
  };
  int64_t convs = 0, linear = 0;
  for (const Row& r : rows) {
    const json& l = layer(j, r.name);
    if (l.is_null()) continue;
    EXPECT_EQ(i64(l["weights"]), r.weights) << r.name;
    EXPECT_EQ(i64(l["params"]), r.params) << r.name;
    EXPECT_EQ(i64(l["macs"]), r.macs) << r.name;
    EXPECT_EQ(l["output_shape"], json(r.shape)) << r.name;
    (l["op"] == "conv2d" ? convs : linear) += i64(l["weights"]);
  }
  EXPECT_EQ(layer(j, "15")["output_shape"], json::array({1, 9216}));  // flatten of 256 × 6 × 6
  const int64_t total = i64(j["totals"]["weights"]);
  EXPECT_EQ(total, 60954656);
  EXPECT_EQ(convs + linear, total);
  EXPECT_EQ(i64(j["totals"]["params"]), 60965224);
  EXPECT_EQ(rounded(total / 1e6, 0), "61");                     // ≈ 61 M
  EXPECT_EQ(rounded(i64(j["totals"]["params"]) / 1e6, 0), "61");
  EXPECT_EQ(rounded(convs / 1e6, 1), "2.3");                    // convs ≈ 2.3 M
  EXPECT_LT(100.0 * convs / total, 4.0);                        // < 4 %
  EXPECT_EQ(rounded(linear / 1e6, 1), "58.6");                  // linear ≈ 58.6 M
  EXPECT_EQ(rounded(100.0 * linear / total, 0), "96");          // ≈ 96 %
  EXPECT_EQ(rounded(100.0 * i64(layer(j, "fc6")["weights"]) / total, 0), "62");  // fc6 ≈ 62 %
  EXPECT_EQ(rounded(i64(j["totals"]["weight_bytes"]["f32"]) / 1e6, 0), "244");   // ≈ 244 MB
  EXPECT_EQ(rounded(i64(j["totals"]["weight_bytes"]["i8"]) / 1e6, 0), "61");     // 61 MB
  EXPECT_EQ(rounded(total * 4 / 1e6, 0), "244");  // the page's weights-only figure, too
  expectWeightBytes(j, 60965224);
}

// ---------------------------------------------------------------- page 001: counts

TEST(GoldenReports, Line_1_1) {
  json j = jsonReport("line_1_1.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 2);
  EXPECT_EQ(i64(j["totals"]["macs"]), 1);
  EXPECT_EQ(i64(j["totals"]["flops"]), 2);                   // "2 operations"
  EXPECT_EQ(i64(j["totals"]["weight_bytes"]["f32"]), 8);     // 2 × 4 bytes
}

TEST(GoldenReports, Dense_7_64) {
  json j = jsonReport("dense_7_64.nn");
  EXPECT_EQ(i64(j["totals"]["weights"]), 448);
  EXPECT_EQ(i64(j["totals"]["biases"]), 64);
  EXPECT_EQ(i64(j["totals"]["params"]), 512);
  EXPECT_EQ(i64(j["memory"]["input_bytes"]), 28);  // (7,) → 28 bytes
}

TEST(GoldenReports, Dense_768_3072) {
  json j = jsonReport("dense_768_3072.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 2362368);
  EXPECT_EQ(i64(j["totals"]["macs_per_example"]), 2359296);
  expectDense(j, "0", 2362368, 2359296);
}

TEST(GoldenReports, ImageLinear_150528_1000_AndTensorSizes) {
  json j = jsonReport("image_linear.nn");
  EXPECT_EQ(i64(j["totals"]["weights"]), 150528000);
  EXPECT_EQ(layer(j, "0")["output_shape"], json::array({1, 150528}));  // flatten: 150,528 numbers
  EXPECT_EQ(i64(j["memory"]["input_bytes"]), 602112);                  // (3,224,224) → 602,112 B
  json b = jsonReport("image_linear.nn", "--batch 8");
  EXPECT_EQ(i64(b["memory"]["input_bytes"]), 4816896);  // 1,204,224 numbers × 4
  EXPECT_EQ(i64(b["memory"]["input_bytes"]) / 4, 1204224);
  EXPECT_EQ(rounded(i64(b["memory"]["input_bytes"]) / 1e6, 2), "4.82");  // 4.82 MB
}

TEST(GoldenReports, Tiny_3_8_1) {
  json j = jsonReport("tiny_3_8_1.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 41);
  expectDense(j, "0", 32, 24);
  expectDense(j, "2", 9, 8);
  EXPECT_EQ(i64(j["totals"]["macs"]), 32);
  EXPECT_EQ(i64(j["totals"]["flops"]), 64);
  EXPECT_EQ(i64(j["totals"]["weight_bytes"]["f32"]), 164);  // 41 × 4
}

TEST(GoldenReports, Wide_4096_256_256_1) {
  json j = jsonReport("wide_4096_256_256_1.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 1114881);
  expectDense(j, "0", 1048832, 1048576);
  expectDense(j, "2", 65792, 65536);
  expectDense(j, "4", 257, 256);
  EXPECT_EQ(i64(j["totals"]["macs"]), 1114368);
  EXPECT_EQ(i64(j["totals"]["flops"]), 2228736);
  expectWeightBytes(j, 1114881);
  EXPECT_EQ(i64(j["totals"]["weight_bytes"]["f32"]), 4459524);
  EXPECT_EQ(i64(j["totals"]["weight_bytes"]["i8"]), 1114881);
  EXPECT_EQ(rounded(4459524 / 1e6, 2), "4.46");  // MB
  EXPECT_EQ(rounded(1114881 / 1e6, 2), "1.11");
  json i8 = jsonReport("wide_4096_256_256_1.nn", "--dtype i8");
  EXPECT_EQ(i64(i8["totals"]["weight_bytes_stored"]), 1114881);
}

TEST(GoldenReports, Stack_48x2048) {
  json j = jsonReport("stack_48x2048.nn", "--dtype i8");
  const int64_t matrices = sumOverLayers(j, ".attention", "params") + sumOverLayers(j, ".mlp", "params");
  const int64_t norms = sumOverLayers(j, "_norm", "params");
  EXPECT_EQ(matrices, 2415919104);  // 48 × (4 + 8) × 2,048²
  EXPECT_EQ(norms, 196608);         // 48 × 2 × 2,048
  EXPECT_EQ(i64(j["totals"]["matrix_params"]), 2415919104);
  EXPECT_EQ(i64(j["totals"]["params"]), 2415919104 + 196608);
  EXPECT_EQ(i64(j["totals"]["biases"]), 0);
  EXPECT_EQ(i64(layer(j, "layers.0.attention")["params"]), 4LL * 2048 * 2048);
  EXPECT_EQ(i64(layer(j, "layers.47.mlp")["params"]), 8LL * 2048 * 2048);
  EXPECT_EQ(i64(j["totals"]["macs_per_example"]), 128 * matrices);  // seq = 128 rows
  // Matrices at int8, as stored under --dtype i8: 2.42 GB = 2.25 GiB.
  const int64_t i8Bytes = sumOverLayers(j, ".attention", "weight_bytes_stored") +
                          sumOverLayers(j, ".mlp", "weight_bytes_stored");
  EXPECT_EQ(i8Bytes, 2415919104);
  EXPECT_EQ(rounded(i8Bytes / 1e9, 2), "2.42");
  EXPECT_EQ(rounded(i8Bytes / double(1LL << 30), 2), "2.25");
  // Matrices at f32: 9,663,676,416 bytes = 9.66 GB = 9.00 GiB.
  json f = jsonReport("stack_48x2048.nn", "--set seq=1");
  const int64_t f32Bytes = sumOverLayers(f, ".attention", "weight_bytes_stored") +
                           sumOverLayers(f, ".mlp", "weight_bytes_stored");
  EXPECT_EQ(f32Bytes, 9663676416);
  EXPECT_EQ(rounded(f32Bytes / 1e9, 2), "9.66");
  EXPECT_EQ(rounded(f32Bytes / double(1LL << 30), 2), "9.00");
  EXPECT_EQ(i64(f["totals"]["macs_per_example"]), 2415919104);  // one MAC per matrix weight per token
}

TEST(GoldenReports, Block_768_3072_768_MatmulShare) {
  json j = jsonReport("block_768_3072_768.nn");
  const int64_t macs = i64(j["totals"]["macs"]), other = i64(j["totals"]["other_ops"]);
  EXPECT_EQ(macs, 4718592);  // 2 × 768 × 3,072
  EXPECT_EQ(other, 6912);    // 3,072 + 768 bias adds + 3,072 ReLUs
  EXPECT_EQ(rounded(100.0 * macs / (macs + other), 2), "99.85");
  EXPECT_TRUE(contains(textReport("block_768_3072_768.nn"), "99.85 %"));
}

// ---------------------------------------------------------------- page 001: traffic

// Traffic = weights once (biases not counted) + one input and one output per example.
TEST(GoldenReports, Traffic_768_3072) {
  json b1 = jsonReport("dense_768_3072.nn");
  const json& l1 = layer(b1, "0");
  EXPECT_EQ(i64(l1["traffic_numbers"]), 2363136);
  EXPECT_EQ(rounded(l1["macs_per_number"].get<double>(), 1), "1.0");
  EXPECT_EQ(rounded(100.0 * i64(l1["weights"]) / i64(l1["traffic_numbers"]), 1), "99.8");

  json b32 = jsonReport("dense_768_3072.nn", "--batch 32");
  const json& l32 = layer(b32, "0");
  EXPECT_EQ(i64(l32["traffic_numbers"]), 32 * 77568);
  EXPECT_EQ(rounded(l32["macs_per_number"].get<double>(), 1), "30.4");

  json b256 = jsonReport("dense_768_3072.nn", "--batch 256");
  const json& l256 = layer(b256, "0");
  EXPECT_EQ(i64(l256["traffic_numbers"]), 256 * 13056);
  EXPECT_EQ(rounded(l256["macs_per_number"].get<double>(), 1), "180.7");
  EXPECT_EQ(rounded(100.0 * i64(l256["weights"]) / i64(l256["traffic_numbers"]), 1), "70.6");

  // 1,024 examples one at a time versus one batch of 1,024: same MACs, ≈ 385× the numbers.
  json b1024 = jsonReport("dense_768_3072.nn", "--batch 1024");
  const int64_t oneAtATime = 1024 * i64(l1["traffic_numbers"]);
  const int64_t together = i64(layer(b1024, "0")["traffic_numbers"]);
  EXPECT_EQ(together, 2359296 + 1024 * 3840);
  EXPECT_EQ(1024 * i64(b1["totals"]["macs"]), i64(b1024["totals"]["macs"]));
  EXPECT_EQ(rounded(double(oneAtATime) / together, 0), "385");
}

TEST(GoldenReports, SquareMatmulTraffic) {
  json j = jsonReport("square_matmul.nn");
  EXPECT_EQ(i64(j["totals"]["macs"]), 4096);
  EXPECT_EQ(i64(layer(j, "0")["traffic_numbers"]), 768);
  EXPECT_EQ(rounded(layer(j, "0")["macs_per_number"].get<double>(), 1), "5.3");
  json big = jsonReport("square_matmul.nn", "--set n=4096");
  EXPECT_EQ(rounded(layer(big, "0")["macs_per_number"].get<double>(), 1), "1365.3");
}

TEST(GoldenReports, TrainingFloor_3_1) {
  json one = jsonReport("line_3_1.nn");
  EXPECT_EQ(i64(one["totals"]["flops"]), 6);  // 3 MACs = 6 operations per answer
  json j = jsonReport("line_3_1.nn", "--batch 800");
  EXPECT_EQ(400 * i64(j["totals"]["flops"]), 1920000);  // 400 passes × 800 examples × 6
  EXPECT_EQ(400 * i64(j["totals"]["flops"]) / i64(one["totals"]["flops"]), 320000);
}

// ---------------------------------------------------------------- LLaMA 7B (page 000)

TEST(GoldenReports, Llama7B) {
  json j = jsonReport("llama_7b.nn");
  EXPECT_EQ(i64(j["totals"]["params"]), 6738415616);
  EXPECT_EQ(i64(j["totals"]["biases"]), 0);
  EXPECT_EQ(i64(layer(j, "layers.0.attention")["params"]), 67108864);       // 4 × 4,096²
  EXPECT_EQ(i64(layer(j, "layers.0.feed_forward")["params"]), 135266304);   // 3 × 4,096 × 11,008
  EXPECT_EQ(i64(layer(j, "layers.0.attention")["params"]) + i64(layer(j, "layers.0.feed_forward")["params"]),
            202375168);
  const int64_t mlps = sumOverLayers(j, ".feed_forward", "params");
  EXPECT_EQ(mlps, 32LL * 135266304);
  EXPECT_EQ(rounded(mlps / 1e9, 1), "4.3");  // MLPs ≈ 4.3 B
  EXPECT_EQ(sumOverLayers(j, "norm", "params"), 65 * 4096);  // 2 × 32 + 1 vectors
  EXPECT_EQ(i64(layer(j, "tok_embeddings")["params"]), 32000 * 4096);
  EXPECT_EQ(i64(layer(j, "output")["params"]), 32000 * 4096);
  expectWeightBytes(j, 6738415616);
  EXPECT_EQ(rounded(i64(j["totals"]["weight_bytes"]["f16"]) / 1e9, 1), "13.5");  // ≈ 13.5 GB at 16 bits
  // ≈ 6.61 billion MACs per token: every matrix but the embedding, once per token.
  const int64_t seq = 2048;
  EXPECT_EQ(i64(j["totals"]["macs_per_example"]) % seq, 0);
  EXPECT_EQ(rounded(i64(j["totals"]["macs_per_example"]) / seq / 1e9, 2), "6.61");
  json one = jsonReport("llama_7b.nn", "--set seq=1");
  EXPECT_EQ(i64(one["totals"]["macs_per_example"]), 6607077376);
  EXPECT_EQ(i64(one["totals"]["macs_per_example"]) * seq, i64(j["totals"]["macs_per_example"]));
}

// "f32 fits only a 48 GB card; 2 bytes fits 16 GB; int8 fits 8 GB" (and the 80 GB card
// this report adds holds everything).
TEST(GoldenReports, Llama7BDeviceFit) {
  json d = jsonReport("llama_7b.nn").at("devices");
  auto fits = [&](const char* device, const char* dtype) { return d.at(device).at(dtype).get<bool>(); };
  for (const char* card : {"8 GB card", "16 GB card", "24 GB card"}) EXPECT_FALSE(fits(card, "f32")) << card;
  EXPECT_TRUE(fits("48 GB card", "f32"));
  EXPECT_TRUE(fits("80 GB card", "f32"));
  EXPECT_FALSE(fits("8 GB card", "f16"));
  EXPECT_TRUE(fits("16 GB card", "f16"));
  EXPECT_TRUE(fits("16 GB card", "bf16"));
  EXPECT_TRUE(fits("8 GB card", "i8"));
  for (const char* dtype : {"f32", "f16", "bf16", "i8", "i4"})
    EXPECT_FALSE(fits("microcontroller (1 MB flash, 256 kB SRAM)", dtype)) << dtype;
}

// A hang guard, not a benchmark: the report of a 7 B model is arithmetic on shapes.
TEST(GoldenReports, Llama7BReportsQuickly) {
  NncRun r = runNnc("llama_7b.nn", "--format json");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  std::printf("[ timing   ] nnc llama_7b.nn --format json: %.3f s\n", r.seconds);
  EXPECT_LT(r.seconds, 5.0 * nnc_cli_test::timeScale());
}

// ---------------------------------------------------------------- other renderings

TEST(GoldenReports, TextReport) {
  std::string t = textReport("mnist.nn");
  EXPECT_TRUE(contains(t, "235,146")) << t;
  EXPECT_TRUE(contains(t, "200,960")) << t;
  EXPECT_TRUE(contains(t, "MB = 10^6")) << t;  // the units are stated
  EXPECT_TRUE(contains(t, "GiB = 2^30")) << t;
}

TEST(GoldenReports, ExplainShowsTheArithmetic) {
  std::string t = textReport("mnist.nn", "--explain");
  EXPECT_TRUE(contains(t, "784 × 256 + 256 = 200,960")) << t;
  EXPECT_TRUE(contains(t, "200,960 + 32,896 + 1,290 = 235,146")) << t;
}

TEST(GoldenReports, SweepHidden) {
  std::string t = textReport("mnist_hidden.nn", "--sweep hidden=256,512");
  EXPECT_TRUE(contains(t, "203,530")) << t;
  EXPECT_TRUE(contains(t, "407,050")) << t;
  NncRun r = runNnc("mnist_hidden.nn", "--sweep hidden=256,512 --format json");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  json rows = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(rows.is_array() && rows.size() == 2) << r.out;
  EXPECT_EQ(i64(rows[0]["totals"]["params"]), 203530);
  EXPECT_EQ(i64(rows[1]["totals"]["params"]), 407050);
}

TEST(GoldenReports, MarkdownReport) {
  std::string t = textReport("mnist.nn", "--format md");
  EXPECT_TRUE(contains(t, "| `fc1` | dense |")) << t;
  EXPECT_TRUE(contains(t, "| **Total** |")) << t;
  EXPECT_TRUE(contains(t, "**235,146**")) << t;
  EXPECT_TRUE(contains(t, "| f32 | 940,584 |")) << t;
}

// Every example in examples/seeds reports cleanly (none is left untested by accident:
// a new example that fails to compile shows up here).
TEST(GoldenReports, EveryExampleReports) {
  for (const char* f : {"tiny_4_3_2.nn", "mnist_128.nn", "mnist.nn", "mnist_hidden.nn", "linear_100_10.nn",
                        "tabular.nn", "no_bias_5_3.nn", "line_1_1.nn", "dense_7_64.nn", "dense_768_3072.nn",
                        "image_linear.nn", "tiny_3_8_1.nn", "wide_4096_256_256_1.nn", "stack_48x2048.nn",
                        "block_768_3072_768.nn", "alexnet_conv3.nn", "alexnet.nn", "llama_7b.nn",
                        "square_matmul.nn", "line_3_1.nn"}) {
    NncRun r = runNnc(f, "--check");
    EXPECT_EQ(r.exitCode, 0) << f << ":\n" << r.out;
  }
}

}  // namespace

// bench/'s conv nets have exactly torchvision's parameters (torchvision 0.14:
// sum(p.numel() for p in resnet18().parameters()) = 11,689,512; mobilenet_v2: 3,504,872).
TEST(BenchModels, ConvNetsCountTorchvisionsParameters) {
  for (const auto& [file, params] : {std::pair<const char*, int64_t>{"resnet18.nn", 11689512},
                                     std::pair<const char*, int64_t>{"mobilenet_v2.nn", 3504872}}) {
    const std::string path = std::string(NNC_SOURCE_DIR) + "/bench/models/" + file;
    NncRun r = runNnc("../../bench/models/" + std::string(file), "--format json");
    ASSERT_EQ(r.exitCode, 0) << path << ":\n" << r.out;
    json j = json::parse(r.out);
    EXPECT_EQ(i64(j["totals"]["params"]), params) << file;
  }
}
