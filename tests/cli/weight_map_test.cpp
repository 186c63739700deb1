// --weight-map FILE (docs/cli.md): the digits MLP's weights, renamed here the way a
// foreign checkpoint names them, load through a map and give the very output of the
// original file; every mistake (in the map, in what it maps to, on the command line)
// is a clean error naming the file's and the mapped names. A tied head's weight, which
// PyTorch's state_dict() saves beside the embedding's table, loads when the two are equal
// or when it is the only copy.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <map>

#include "NncProcess.h"
#include "SafeTensorsEdit.h"

using namespace nnc_cli_test;
using nnc::testing::renamed;
using nnc::testing::SafeTensorsBytes;
using nnc::testing::withCopy;

namespace {

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

const std::string kDigits = std::string(NNC_SOURCE_DIR) + "/examples/digits/";

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// digits' tensors as a checkpoint with a "model." prefix and short suffixes names them.
const std::map<std::string, std::string> kForeign = {
    {"fc1.weight", "model.fc1.w"}, {"fc1.bias", "model.fc1.b"}, {"fc2.weight", "model.fc2.w"},
    {"fc2.bias", "model.fc2.b"},   {"fc3.weight", "model.fc3.w"}, {"fc3.bias", "model.fc3.b"}};
const char *kMap = "# digits from a foreign checkpoint\nmodel.* -> *\n\n*.w -> *.weight   # weights\n*.b -> *.bias\n";

Result runDigits(const std::vector<std::string> &extra) {
  std::vector<std::string> args = {kDigits + "digits.nn", "--run", kDigits + "test_images_5.npy"};
  args.insert(args.end(), extra.begin(), extra.end());
  return runNnc(args, 60);
}

TEST(WeightMapCli, RenamedWeightsGiveTheOriginalOutput) {
  nnc_cli_test::SharedKernelCache oneRow; // the outputs are compared bit for bit
  TempDir d;
  const std::string w = d.write("foreign.safetensors", renamed(kDigits + "digits.safetensors", kForeign));
  const std::string map = d.write("foreign.map", kMap);
  Result original = runDigits({"--weights", kDigits + "digits.safetensors"});
  ASSERT_EQ(original.exitCode, 0) << original.describe();
  Result mapped = runDigits({"--weights", w, "--weight-map", map});
  ASSERT_EQ(mapped.exitCode, 0) << mapped.describe();
  EXPECT_EQ(mapped.out, original.out);
  EXPECT_CONTAINS(mapped.out, "argmax per row: ");
  // --weight-map=FILE is the same flag.
  Result eq = runDigits({"--weights", w, "--weight-map=" + map});
  EXPECT_EQ(eq.out, original.out) << eq.describe();
  // Without the map the same file does not fit, naming the file's names.
  Result without = runDigits({"--weights", w});
  EXPECT_EQ(without.exitCode, 1) << without.describe();
  EXPECT_CONTAINS(without.err, "missing tensor 'fc1.weight'");
  EXPECT_CONTAINS(without.err, "6 tensors the model does not have: 'model.fc1.b'");
}

// Every action that reads --weights renames them: --compare-dtypes ignored the map and
// said the file's tensors were missing. --bench, --compare-dtypes and --generate (a
// decoder's weights under examples/llama.weightmap) load through it.
TEST(WeightMapCli, EveryActionThatReadsWeightsAppliesTheMap) {
  TempDir d;
  const std::string w = d.write("foreign.safetensors", renamed(kDigits + "digits.safetensors", kForeign));
  const std::string map = d.write("foreign.map", kMap);
  for (const std::vector<std::string> &action :
       {std::vector<std::string>{"--bench", "--runs", "1"}, {"--compare-dtypes", "--runs", "1", "--format", "json"}}) {
    std::vector<std::string> args = {kDigits + "digits.nn", "--weights", w, "--weight-map", map};
    args.insert(args.end(), action.begin(), action.end());
    Result r = runNnc(args, 120);
    EXPECT_EQ(r.exitCode, 0) << r.describe();
  }
  Result compare = runNnc({kDigits + "digits.nn", "--compare-dtypes", "--runs", "1", "--format", "json", "--weights",
                           w, "--weight-map", map, "--input", kDigits + "test_images_5.npy"},
                          120);
  ASSERT_EQ(compare.exitCode, 0) << compare.describe();
  Result original = runNnc({kDigits + "digits.nn", "--compare-dtypes", "--runs", "1", "--format", "json",
                            "--weights", kDigits + "digits.safetensors", "--input", kDigits + "test_images_5.npy"},
                           120);
  ASSERT_EQ(original.exitCode, 0) << original.describe();
  const nlohmann::json a = nlohmann::json::parse(compare.out), b = nlohmann::json::parse(original.out);
  for (size_t i = 0; i < a["dtypes"].size(); ++i) // the same weights: the same errors against f32
    EXPECT_EQ(a["dtypes"][i].value("max_rel_error", -1.0), b["dtypes"][i].value("max_rel_error", -1.0)) << i;
  const std::string hf = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/hf_llama/";
  const std::string prompt = d.write("p.npy", nnc_cli_test::npyIntegers({1, 2}, {1, 2}));
  Result generate = runNnc({hf + "model.nn", "--generate", "2", "--prompt", prompt, "--weights",
                            hf + "f32/model.safetensors", "--weight-map",
                            std::string(NNC_SOURCE_DIR) + "/examples/llama.weightmap"},
                           120);
  EXPECT_EQ(generate.exitCode, 0) << generate.describe();
}

TEST(WeightMapCli, WhatTheMapGetsWrongNamesBothNames) {
  TempDir d;
  const std::string w = d.write("foreign.safetensors", renamed(kDigits + "digits.safetensors", kForeign));
  // The bias rule forgotten: the biases stay unmatched.
  const std::string half = d.write("half.map", "model.* -> *\n*.w -> *.weight\n");
  Result r = runDigits({"--weights", w, "--weight-map", half});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "weights do not match model 'digits' (names renamed by " + half + ")");
  EXPECT_CONTAINS(r.err, "missing tensor 'fc1.bias': expected shape [64]; no tensor of the file maps to it (the nearest "
                         "name");
  EXPECT_CONTAINS(r.err, "makes is 'fc1.b' (the file's 'model.fc1.b'))");
  EXPECT_CONTAINS(r.err, "3 tensors the model does not have: 'fc1.b' (the file's 'model.fc1.b')");
  // Two tensors onto one name.
  Result clash = runDigits({"--weights", w, "--weight-map", d.write("clash.map", "model.fc1.* -> fc1.weight\n")});
  EXPECT_EQ(clash.exitCode, 1) << clash.describe();
  EXPECT_CONTAINS(clash.err, "tensors 'model.fc1.b' and 'model.fc1.w' of the file both map to 'fc1.weight'");
  EXPECT_EQ(clash.err.find("has shape"), std::string::npos) << "reported once, not again as mis-shaped";
}

// tiny_gpt2's head is dense(tie=wte). PyTorch's state_dict() holds the table under both
// names, and a file may keep the head's alone: both load and give the file's output; two
// copies that differ (in values, shape or dtype) are an error naming how; a head that is
// not tied reads a weight of its own, which the file must hold.
TEST(WeightMapCli, ATiedHeadsWeightLoadsBesideOrInsteadOfTheTable) {
  const std::string fixture = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/tiny_gpt2_b1_s1/";
  const std::string weights = fixture + "weights.safetensors";
  TempDir d;
  const auto run = [&](const std::string &w) {
    return runNnc({fixture + "model.nn", "--run", fixture + "input.npy", "--weights", w}, 60);
  };
  nnc_cli_test::SharedKernelCache oneRow; // the outputs are compared bit for bit
  Result original = run(weights);
  ASSERT_EQ(original.exitCode, 0) << original.describe();
  Result both = run(d.write("both.safetensors", withCopy(weights, "wte.weight", "head.weight")));
  ASSERT_EQ(both.exitCode, 0) << both.describe();
  EXPECT_EQ(both.out, original.out);
  Result headOnly = run(d.write("head.safetensors", renamed(weights, {{"wte.weight", "head.weight"}})));
  ASSERT_EQ(headOnly.exitCode, 0) << headOnly.describe();
  EXPECT_EQ(headOnly.out, original.out);

  Result differ = run(d.write("differ.safetensors", withCopy(weights, "wte.weight", "head.weight", 2 * 48 + 5)));
  ASSERT_TRUE(differ.clean()) << differ.describe();
  EXPECT_EQ(differ.exitCode, 1);
  EXPECT_CONTAINS(differ.err, "tensor 'head.weight' differs from 'wte.weight' at [2, 5] (");
  EXPECT_CONTAINS(differ.err, "but 'head' is tied to 'wte' (tie=): it reads the embedding's table, so a file that "
                              "holds both must hold them equal (without tie=, 'head' has a weight of its own)");
  EXPECT_TRUE(differ.out.empty()) << "nothing ran";

  // Copies of different shapes: the model's [61, 48] table beside a [32, 48] head (wpe's bytes).
  const std::string other = withCopy(weights, "wpe.weight", "head.weight");
  Result shapes = run(d.write("shapes.safetensors", other));
  EXPECT_EQ(shapes.exitCode, 1) << shapes.describe();
  EXPECT_CONTAINS(shapes.err, "tensor 'head.weight' has shape [32, 48] and 'wte.weight' has [61, 48], but 'head' is "
                              "tied to 'wte'");

  // A head's copy that is no float tensor (its bytes as I32).
  SafeTensorsBytes ints(d.write("ints.safetensors", withCopy(weights, "wte.weight", "head.weight")));
  ints.header["head.weight"]["dtype"] = "I32";
  Result notFloats = run(d.write("ints2.safetensors", ints.bytes()));
  EXPECT_EQ(notFloats.exitCode, 1) << notFloats.describe();
  EXPECT_CONTAINS(notFloats.err, "tensor 'head.weight' holds I32, not floats, but 'head' is tied to 'wte'");

  // Without tie= the head owns its weight: the same file with both runs it.
  const std::string untied = d.write("untied.nn", [&] {
    std::string s = slurp(fixture + "model.nn");
    s.replace(s.find(", tie=wte"), 9, "");
    return s;
  }());
  Result own = runNnc({untied, "--run", fixture + "input.npy", "--weights",
                       d.write("both2.safetensors", withCopy(weights, "wte.weight", "head.weight"))},
                      60);
  ASSERT_EQ(own.exitCode, 0) << own.describe();
  EXPECT_EQ(own.out, original.out);
  Result lacking = runNnc({untied, "--run", fixture + "input.npy", "--weights", weights}, 60);
  EXPECT_EQ(lacking.exitCode, 1) << lacking.describe();
  EXPECT_CONTAINS(lacking.err, "missing tensor 'head.weight': expected shape [61, 48]");
}

// A map that cannot reshape a tied head's copy (a split the rows do not divide, a 1-D
// tensor transposed) is an error naming the copy, though the head never loads it; one
// that cannot reshape the table is reported once, with the table.
TEST(WeightMapCli, ATiedHeadsCopyThatTheMapCannotReshapeIsAnError) {
  const std::string fixture = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/tiny_gpt2_b1_s1/";
  const std::string weights = fixture + "weights.safetensors";
  TempDir d;
  const auto run = [&](const std::string &w, const std::string &map) {
    return runNnc({fixture + "model.nn", "--run", fixture + "input.npy", "--weights", w, "--weight-map", d.write("m.map", map)},
                  60);
  };
  // 61 rows in 4 parts, each part's first rows equal to the table's
  Result split = run(d.write("split.safetensors", withCopy(weights, "wte.weight", "lm")), "lm -> {head,x,y,z}.weight\n");
  ASSERT_TRUE(split.clean()) << split.describe();
  EXPECT_EQ(split.exitCode, 1);
  EXPECT_CONTAINS(split.err, "tensor 'head.weight' (the file's 'lm'): ");
  EXPECT_CONTAINS(split.err, "m.map reshapes it, but a split in 4 along the first axis takes a tensor whose first axis "
                             "is a multiple of 4, and it has shape [61, 48]");
  Result flat = run(d.write("flat.safetensors", withCopy(weights, "h.0.ln_1.weight", "lm")), "lm -> head.weight transposed\n");
  ASSERT_TRUE(flat.clean()) << flat.describe();
  EXPECT_EQ(flat.exitCode, 1);
  EXPECT_CONTAINS(flat.err, "tensor 'head.weight' (the file's 'lm'): ");
  EXPECT_CONTAINS(flat.err, "m.map reshapes it, but 'transposed' takes a 2-D tensor, and it has shape [48]");
  Result table = run(d.write("table.safetensors", withCopy(weights, "wte.weight", "head.weight")), "wte.weight -> {wte,j}.weight\n");
  ASSERT_TRUE(table.clean()) << table.describe();
  EXPECT_EQ(table.exitCode, 1);
  const std::string once = "m.map reshapes it, but a split in 2 along the first axis";
  ASSERT_NE(table.err.find(once), std::string::npos) << table.describe();
  EXPECT_EQ(table.err.find(once, table.err.find(once) + 1), std::string::npos) << table.describe();
}

TEST(WeightMapCli, MistakesInTheMapAreReportedWithLineAndColumn) {
  TempDir d;
  const std::string map = d.write("bad.map", "model.* -> *\n*.w => *.weight\n*.b -> *.*\n");
  Result r = runDigits({"--weights", kDigits + "digits.safetensors", "--weight-map", map});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_CONTAINS(r.err, "nnc: error: " + map + ": 2 errors in the weight map:");
  EXPECT_CONTAINS(r.err, map + ":2:5: expected '->' after '*.w', found '=>'");
  EXPECT_CONTAINS(r.err, map + ":3:8: '*.*' has 2 '*' but '*.b' has 1");
  EXPECT_TRUE(r.out.empty()) << "nothing ran";

  Result missing = runDigits({"--weights", kDigits + "digits.safetensors", "--weight-map", d.write("x", "") + ".none"});
  EXPECT_EQ(missing.exitCode, 1) << missing.describe();
  EXPECT_CONTAINS(missing.err, ".none: cannot open weight map: No such file or directory");

  // Binary garbage: one clean error, a bounded message.
  std::string garbage;
  for (int i = 0; i < 200000; ++i) garbage += char((i * 7919) % 251);
  Result g = runDigits({"--weights", kDigits + "digits.safetensors", "--weight-map", d.write("g.map", garbage)});
  ASSERT_TRUE(g.clean()) << g.describe();
  EXPECT_EQ(g.exitCode, 1);
  EXPECT_LT(g.err.size(), 6000u);
}

TEST(WeightMapCli, NeedsAWeightsFile) {
  TempDir d;
  const std::string map = d.write("m.map", kMap);
  Result random = runDigits({"--random-weights", "1", "--weight-map", map});
  EXPECT_EQ(random.exitCode, 2) << random.describe();
  EXPECT_CONTAINS(random.err, "--weight-map renames the tensors of a weights file: it needs --weights "
                              "FILE.safetensors (random weights are drawn by the model's own names)");
  Result none = runNnc({kDigits + "digits.nn", "--weight-map", map});
  EXPECT_EQ(none.exitCode, 2) << none.describe();
  EXPECT_CONTAINS(none.err, "it needs --weights FILE.safetensors");
  Result noValue = runNnc({kDigits + "digits.nn", "--run", "x.npy", "--weights", "w", "--weight-map"});
  EXPECT_EQ(noValue.exitCode, 2) << noValue.describe();
  EXPECT_CONTAINS(noValue.err, "--weight-map needs a value");
}

TEST(WeightMapCli, TheHelpListsIt) {
  Result r = runNnc({"--help"});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_CONTAINS(r.out, "--weight-map FILE");
}

} // namespace
