// Weight maps (runtime/io/WeightMap.h, docs/cli.md --weight-map): the rule syntax and
// its errors (file:line:col, what was expected and found, bounded), the matching of
// `*` (one or more characters, the whole name, leftmost-shortest), rules applied in
// order like a sed script, the reshaping rules (transposed, {a,b} splits, '-' drops), and
// the loader's errors naming the file's and the mapped names (runtime/model/WeightStore.h).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "CompileHelpers.h"
#include "compiler/support/Error.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/WeightMap.h"
#include "runtime/model/WeightStore.h"

using namespace nnc;
using nnc::runtime::WeightMap;
using nnc::runtime::matchWeightPattern;
namespace fs = std::filesystem;

namespace {

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// The UserError parsing `text` throws (empty when it parses).
std::string parseError(const std::string &text) {
  try {
    WeightMap::parse(text, "m.map");
  } catch (const UserError &e) {
    return e.what();
  }
  return {};
}

std::vector<std::string> captures(const std::string &pattern, const std::string &name) {
  auto m = matchWeightPattern(pattern, name);
  EXPECT_TRUE(m) << pattern << " on " << name;
  return m ? std::vector<std::string>(m->begin(), m->end()) : std::vector<std::string>{};
}

TEST(WeightMap, TheLlamaExampleOfTheIssue) {
  WeightMap m = WeightMap::parse("model.* -> *\n*.q_proj.weight -> *.q.weight\n*.gate_proj.weight -> *.gate.weight\n",
                                 "llama.map");
  ASSERT_EQ(m.rules().size(), 3u);
  EXPECT_EQ(m.rules()[1].from, "*.q_proj.weight");
  EXPECT_EQ(m.rules()[1].to, "*.q.weight");
  EXPECT_EQ(m.rules()[1].line, 2);
  EXPECT_EQ(m.apply("model.layers.3.self_attn.q_proj.weight"), "layers.3.self_attn.q.weight");
  EXPECT_EQ(m.apply("model.layers.0.mlp.gate_proj.weight"), "layers.0.mlp.gate.weight");
  EXPECT_EQ(m.apply("model.norm.weight"), "norm.weight");
  EXPECT_EQ(m.apply("lm_head.weight"), "lm_head.weight"); // no rule matches: as it is
}

TEST(WeightMap, TheShippedLlamaMapCoversEveryLlamaForCausalLMName) {
  WeightMap m = WeightMap::fromFile(std::string(NNC_SOURCE_DIR) + "/examples/llama.weightmap");
  const std::pair<const char *, const char *> names[] = {
      {"model.embed_tokens.weight", "embed_tokens.weight"},
      {"model.layers.0.input_layernorm.weight", "layers.0.input_layernorm.weight"},
      {"model.layers.21.self_attn.q_proj.weight", "layers.21.self_attn.q.weight"},
      {"model.layers.21.self_attn.k_proj.weight", "layers.21.self_attn.k.weight"},
      {"model.layers.21.self_attn.v_proj.weight", "layers.21.self_attn.v.weight"},
      {"model.layers.21.self_attn.o_proj.weight", "layers.21.self_attn.o.weight"},
      {"model.layers.5.post_attention_layernorm.weight", "layers.5.post_attention_layernorm.weight"},
      {"model.layers.5.mlp.gate_proj.weight", "layers.5.mlp.gate.weight"},
      {"model.layers.5.mlp.up_proj.weight", "layers.5.mlp.up.weight"},
      {"model.layers.5.mlp.down_proj.weight", "layers.5.mlp.down.weight"},
      {"model.norm.weight", "norm.weight"},
      {"lm_head.weight", "lm_head.weight"},
  };
  for (const auto &[from, to] : names) EXPECT_EQ(m.apply(from), to) << from;
}

// bench/'s conv nets: torchvision's state-dict names onto the .nn's (bench/conv_bench.py
// loads torchvision's weights through these maps and checks the outputs).
TEST(WeightMap, TheShippedTorchvisionMapsOfTheConvBenchmarks) {
  WeightMap resnet = WeightMap::fromFile(std::string(NNC_SOURCE_DIR) + "/bench/models/resnet18.weightmap");
  EXPECT_EQ(resnet.apply("conv1.weight"), "conv1.weight");
  EXPECT_EQ(resnet.apply("layer1.0.conv1.weight"), "layer1_0.conv1.weight");
  EXPECT_EQ(resnet.apply("layer3.1.bn2.running_var"), "layer3_1.bn2.running_var");
  EXPECT_EQ(resnet.apply("layer4.0.downsample.1.weight"), "layer4_0.downsample.1.weight");
  EXPECT_EQ(resnet.apply("fc.bias"), "fc.bias");
  WeightMap mobile = WeightMap::fromFile(std::string(NNC_SOURCE_DIR) + "/bench/models/mobilenet_v2.weightmap");
  const std::pair<const char *, const char *> names[] = {
      {"features.0.0.weight", "features_0.0.weight"},         {"features.0.1.running_mean", "features_0.1.running_mean"},
      {"features.1.conv.0.0.weight", "features_1.0.weight"},  {"features.1.conv.1.weight", "features_1.3.weight"},
      {"features.1.conv.2.bias", "features_1.4.bias"},        {"features.2.conv.0.0.weight", "features_2.0.weight"},
      {"features.12.conv.0.1.weight", "features_12.1.weight"}, {"features.12.conv.1.0.weight", "features_12.3.weight"},
      {"features.17.conv.1.1.running_var", "features_17.4.running_var"},
      {"features.10.conv.2.weight", "features_10.6.weight"},  {"features.16.conv.3.bias", "features_16.7.bias"},
      {"features.18.0.weight", "features_18.0.weight"},       {"features.18.1.running_var", "features_18.1.running_var"},
      {"classifier.1.weight", "classifier.weight"}};
  for (const auto &[from, to] : names) EXPECT_EQ(mobile.apply(from), to) << from;
}

TEST(WeightMap, CommentsBlankLinesSpacesCrlfAndAByteOrderMark) {
  WeightMap m = WeightMap::parse("\xEF\xBB\xBF# a map\n\n   \t\n  a.*->b.*   # trailing comment\r\n\tc -> d\r\n#x -> y\n",
                                 "m.map");
  ASSERT_EQ(m.rules().size(), 2u);
  EXPECT_EQ(m.rules()[0].line, 4);
  EXPECT_EQ(m.rules()[1].line, 5);
  EXPECT_EQ(m.apply("a.1"), "b.1");
  EXPECT_EQ(m.apply("c"), "d");
  EXPECT_EQ(m.apply("x"), "x");
  EXPECT_TRUE(WeightMap::parse("", "e").empty());
  EXPECT_TRUE(WeightMap::parse("# only a comment", "e").empty());
}

TEST(WeightMap, StarMatchesOneOrMoreCharactersAndTheWholeName) {
  EXPECT_FALSE(matchWeightPattern("model.*", "model."));  // one or more
  EXPECT_EQ(captures("model.*", "model.x"), std::vector<std::string>{"x"});
  EXPECT_FALSE(matchWeightPattern("a*", "ba"));           // anchored at the start
  EXPECT_FALSE(matchWeightPattern("*a", "ab"));           // and at the end
  EXPECT_FALSE(matchWeightPattern("a.b", "a.bc"));        // no '*': the same name
  EXPECT_TRUE(matchWeightPattern("a.b", "a.b"));
  EXPECT_FALSE(matchWeightPattern("*.*", "a."));          // the second '*' needs a character
  EXPECT_FALSE(matchWeightPattern("ab*ba", "aba"));       // prefix and suffix may not overlap
  EXPECT_EQ(captures("*", "x"), std::vector<std::string>{"x"});
}

TEST(WeightMap, SeveralStarsAreLeftmostShortest) {
  EXPECT_EQ(captures("*.*", "a.b.c"), (std::vector<std::string>{"a", "b.c"}));
  EXPECT_EQ(captures("*.*.weight", "layers.0.q.weight"), (std::vector<std::string>{"layers", "0.q"}));
  EXPECT_EQ(captures("**", "abc"), (std::vector<std::string>{"a", "bc"}));
  // The second * starts at the second a and must take a character: "ay".
  EXPECT_EQ(captures("*a*a*", "xaayaz"), (std::vector<std::string>{"x", "ay", "z"}));
  // The earliest place of a middle part that still lets the rest match.
  EXPECT_EQ(captures("*.b*.c", "a.b.b.c"), (std::vector<std::string>{"a", ".b"}));
  EXPECT_EQ(WeightMap::parse("*.* -> *|*", "m").apply("a.b.c"), "a|b.c");
}

TEST(WeightMap, RulesApplyInOrderEachToTheResultOfTheOnesBefore) {
  WeightMap m = WeightMap::parse("a -> b\nb -> c\nx.* -> *\n", "m");
  EXPECT_EQ(m.apply("a"), "c"); // like sed: rule 2 sees rule 1's output
  EXPECT_EQ(m.apply("b"), "c");
  EXPECT_EQ(m.apply("x.a"), "a"); // rule 3 comes after 1 and 2: not renamed again
  WeightMap prefix = WeightMap::parse("* -> model.*", "m");
  EXPECT_EQ(prefix.apply("fc1.weight"), "model.fc1.weight");
  WeightMap fewer = WeightMap::parse("*.*.w -> *.w", "m");
  EXPECT_EQ(fewer.apply("a.b.w"), "a.w"); // TO may drop a capture
}

// map()'s names, each as "name" plus " T" when transposed and " i/n" for part i of n.
std::vector<std::string> mapped(const WeightMap &m, const std::string &name) {
  std::vector<std::string> out;
  for (const WeightMap::Mapped &x : m.map(name))
    out.push_back(x.name + (x.transposed ? " T" : "") + (x.parts > 1 ? fmt::format(" {}/{}", x.part, x.parts) : ""));
  return out;
}

TEST(WeightMap, TransposedSplitAndDroppedTensors) {
  const WeightMap m = WeightMap::parse("transformer.* -> *\n*.c_attn.weight -> *.{q,k,v}.weight transposed\n"
                                       "*.c_fc.weight -> *.up.weight   transposed # [in, out]\n*.attn.bias -> -\n"
                                       "*.q.weight -> *.query.weight\n",
                                       "m.map");
  EXPECT_TRUE(m.rules()[1].transposed);
  EXPECT_FALSE(m.rules()[0].transposed);
  EXPECT_TRUE(m.rules()[3].drops());
  EXPECT_EQ(mapped(m, "transformer.h.0.attn.c_attn.weight"),
            (std::vector<std::string>{"h.0.attn.query.weight T 0/3", "h.0.attn.k.weight T 1/3", "h.0.attn.v.weight T 2/3"}));
  EXPECT_EQ(mapped(m, "h.1.mlp.c_fc.weight"), (std::vector<std::string>{"h.1.mlp.up.weight T"}));
  EXPECT_EQ(mapped(m, "h.1.attn.bias"), std::vector<std::string>{});
  EXPECT_EQ(mapped(m, "h.1.attn.c_attn.bias"), (std::vector<std::string>{"h.1.attn.c_attn.bias"}));
  EXPECT_EQ(m.apply("h.0.attn.c_attn.weight"), "h.0.attn.query.weight, h.0.attn.k.weight, h.0.attn.v.weight");
  EXPECT_EQ(m.apply("h.1.attn.bias"), "");
  // Rules that would reshape a part: named with the rule.
  const WeightMap twice = WeightMap::parse("* -> *.{a,b}\n*.a -> *.{c,d}\n*.b -> *.t transposed\n", "t.map");
  try {
    twice.map("x");
    FAIL();
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "t.map:2: the rule '*.a -> *.{c,d}' splits 'x.a' again; a tensor is split once");
  }
  const WeightMap late = WeightMap::parse("* -> *.{a,b}\n*.b -> *.t transposed\n", "t.map");
  try {
    late.map("x");
    FAIL();
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "t.map:2: the rule '*.b -> *.t transposed' transposes 'x.b', a part of a split tensor");
  }
}

TEST(WeightMap, ReshapingRulesThatCannotParse) {
  EXPECT_CONTAINS(parseError("a -> b transpose\n"), "m.map:1:8: expected 'transposed' or the end of the rule after 'b', "
                                                     "found 'transpose'");
  EXPECT_CONTAINS(parseError("a -> b transposed x\n"), "m.map:1:19: expected the end of the rule after 'transposed', found 'x'");
  EXPECT_CONTAINS(parseError("a -> - transposed\n"), "m.map:1:6: a rule whose TO is '-' drops the tensor");
  EXPECT_CONTAINS(parseError("a -> {b}\n"), "in '{b}': expected two or more names in '{a,b,...}'");
  EXPECT_CONTAINS(parseError("a -> {b,}\n"), "in '{b,}': expected a name between the commas and braces");
  EXPECT_CONTAINS(parseError("a -> x{b,c\n"), "m.map:1:7: in 'x{b,c': expected a group '{a,b,...}' with both braces");
  EXPECT_CONTAINS(parseError("a -> {b,c}{d,e}\n"), "expected one '{a,b,...}' group (a tensor is split once)");
  EXPECT_CONTAINS(parseError("*.a -> {*,c}\n"), "a '{a,b}' group holds names, not '*'");
  EXPECT_CONTAINS(parseError("a -> b,c\n"), "',' stands only between the names of a '{a,b}' group");
  EXPECT_CONTAINS(parseError("a -> {b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r}\n"),
                  "expected at most 16 names in '{a,b,...}', found 17");
  EXPECT_CONTAINS(parseError("a -> x.{q,k,q}.w\n"), "m.map:1:8: in 'x.{q,k,q}.w': expected different names in "
                                                   "'{a,b,...}' (one per part), found 'q' twice");
  EXPECT_EQ(parseError("a -> {b,c}.w transposed\n*.x -> -\n"), "");
}

TEST(WeightMap, ParseErrorsSayWhereWhatWasExpectedAndWhatWasFound) {
  EXPECT_CONTAINS(parseError("a.b c.d\n"), "m.map:1:5: expected '->' after 'a.b', found 'c.d'");
  EXPECT_CONTAINS(parseError("\n  a.b\n"), "m.map:2:6: expected '->' after 'a.b', found the end of the line");
  EXPECT_CONTAINS(parseError("a.b # c\n"), "m.map:1:5: expected '->' after 'a.b', found a comment");
  EXPECT_CONTAINS(parseError("a ->\n"), "m.map:1:5: expected a name pattern after 'a ->', found the end of the line");
  EXPECT_CONTAINS(parseError("a -> -> b\n"), "m.map:1:6: expected a name pattern after 'a ->', found '->'");
  EXPECT_CONTAINS(parseError("  -> b\n"), "m.map:1:3: expected a name pattern before '->'");
  EXPECT_CONTAINS(parseError("a -> b c\n"), "m.map:1:8: expected 'transposed' or the end of the rule after 'b', found 'c'");
  EXPECT_CONTAINS(parseError("a.* -> *.*\n"),
                  "m.map:1:8: '*.*' has 2 '*' but 'a.*' has 1: the i-th '*' of TO takes what the i-th '*' of FROM "
                  "matched, so TO may not have more");
  EXPECT_CONTAINS(parseError("a -> *\n"), "'*' has 1 '*' but 'a' has 0");
  EXPECT_CONTAINS(parseError("a\x01" "b -> c\n"), "m.map:1:2: unexpected byte '\\x01'");
  EXPECT_EQ(parseError("a.\xC3\xA9 -> b\n"), ""); // UTF-8 names are names
}

TEST(WeightMap, EveryMistakeIsReportedAndTheCountIsBounded) {
  std::string e = parseError("a b\nok -> fine\nc\n");
  EXPECT_CONTAINS(e, "m.map: 2 errors in the weight map:");
  EXPECT_CONTAINS(e, "m.map:1:3:");
  EXPECT_CONTAINS(e, "m.map:3:2:");
  std::string many;
  for (int i = 0; i < 30; ++i) many += "bad\n";
  e = parseError(many);
  EXPECT_CONTAINS(e, "m.map: 30 errors in the weight map:");
  EXPECT_CONTAINS(e, "m.map:20:4:");
  EXPECT_EQ(e.find("m.map:21:4:"), std::string::npos) << "only the first 20 are listed";
  EXPECT_CONTAINS(e, "... and 10 more");
}

TEST(WeightMap, MessagesNeverEchoLongInput) {
  const std::string longName(3000, 'x');
  std::string e = parseError(longName + " y\n");
  EXPECT_CONTAINS(e, "expected '->' after 'xxx");
  EXPECT_CONTAINS(e, "... (3,000 bytes)");
  EXPECT_LT(e.size(), 400u);
  e = parseError(std::string(5000, 'y') + " -> z\n");
  EXPECT_CONTAINS(e, "m.map:1:4097: expected a line of at most 4,096 bytes, found 5,005 bytes");
  EXPECT_LT(e.size(), 200u);
}

TEST(WeightMap, AtMostAThousandRules) {
  std::string rules;
  for (size_t i = 0; i < WeightMap::kMaxRules; ++i) rules += "a -> a\n";
  EXPECT_EQ(WeightMap::parse(rules, "m").rules().size(), WeightMap::kMaxRules);
  EXPECT_CONTAINS(parseError(rules + "# a comment is fine\nb -> b\n"), "m.map:1002:1: expected at most 1,000 rules, found more");
}

TEST(WeightMap, ANameGrowsByAtMost256Bytes) {
  WeightMap m = WeightMap::parse("* -> " + std::string(200, 'p') + "*\n* -> " + std::string(100, 'q') + "*\n", "m.map");
  try {
    m.apply("fc.weight");
    FAIL() << "expected an error";
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "m.map:2: the rule '* -> qqq");
    EXPECT_CONTAINS(e.what(), "makes the name of tensor 'fc.weight' 309 bytes long; a weight map may lengthen a name by at most 256 bytes");
  }
  EXPECT_EQ(WeightMap::parse("* -> " + std::string(247, 'p') + "*", "m").apply("fc.weight").size(), 256u);
}

TEST(WeightMap, MatchingIsLinearEvenOnPathologicalNames) {
  const std::string name(4'000'000, 'a');
  const std::string pattern = "*" + std::string(4000, 'a') + "b*";
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(matchWeightPattern(pattern, name));
  EXPECT_TRUE(matchWeightPattern("*" + std::string(4000, 'a') + "*", name));
  std::string periodic;
  for (int i = 0; i < 2'000'000; ++i) periodic += "ab";
  std::string needle = "c";
  for (int i = 0; i < 2000; ++i) needle += "ab";
  EXPECT_FALSE(matchWeightPattern("*" + needle + "*", periodic));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

// A small decoder named as LlamaForCausalLM names its modules (docs/cli.md, the
// LLaMA-family map): its parameters, as the compiler names them, load from a
// checkpoint under Hugging Face's names through examples/llama.weightmap.
const char *kLlamaNamedModel = R"(let d = 64
block decoder(heads, kv, ffn) {
  residual { input_layernorm = rmsnorm; self_attn = attention(heads, kv_heads=kv, rope=true) }
  residual { post_attention_layernorm = rmsnorm; mlp = gated_mlp(ffn) }
}
model llama(seq = 8) {
  input tokens: i32[seq]
  embed_tokens = embedding(100, d)
  repeat 2 as layers { decoder(heads=4, kv=2, ffn=128) }
  norm = rmsnorm
  lm_head = dense(100, bias=false)
}
)";

TEST(WeightMap, TheShippedLlamaMapLoadsAHuggingFaceCheckpointIntoALlamaNamedModel) {
  auto c = test::compile(kLlamaNamedModel);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  std::vector<ir::ParamTensor> params;
  for (const auto &op : c.graph->ops) params.insert(params.end(), op.params.begin(), op.params.end());
  ASSERT_EQ(params.size(), 2u + 2 * 9 + 1);
  // The checkpoint: every parameter under its Hugging Face name, filled with its index.
  auto hfName = [](std::string n) {
    for (const char *p : {"q", "k", "v", "o", "gate", "up", "down"}) {
      const std::string from = std::string(".") + p + ".weight";
      if (n.size() > from.size() && n.compare(n.size() - from.size(), from.size(), from) == 0)
        n = n.substr(0, n.size() - from.size()) + "." + p + "_proj.weight";
    }
    return n == "lm_head.weight" ? n : "model." + n;
  };
  std::vector<NamedF32Tensor> file;
  for (size_t i = 0; i < params.size(); ++i)
    file.push_back({hfName(params[i].name), params[i].shape, std::vector<float>(size_t(params[i].count()), float(i))});
  EXPECT_EQ(file[3].name, "model.layers.0.self_attn.k_proj.weight");
  char dir[] = "/tmp/nnc_io_wmap_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/model.safetensors";
  writeSafeTensors(path, file);
  const WeightMap map = WeightMap::fromFile(std::string(NNC_SOURCE_DIR) + "/examples/llama.weightmap");
  runtime::WeightStore store = runtime::WeightStore::fromSafeTensors(params, path, "llama", map);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(store.get(params[i].name).values().front(), float(i)) << params[i].name;
  // Without the map nothing matches.
  EXPECT_THROW(runtime::WeightStore::fromSafeTensors(params, path, "llama"), UserError);
  fs::remove_all(dir);
}

class WeightMapFiles : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nnc_io_wmap_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string &name, const std::string &bytes) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // The UserError loading `weights` for a model of fc1 [3, 4] + bias and fc2 [2, 3].
  std::string loadError(const std::string &weights, const std::string &map) {
    try {
      runtime::WeightStore::fromSafeTensors(model_, weights, "m", WeightMap::parse(map, "m.map"));
    } catch (const UserError &e) {
      return e.what();
    }
    return {};
  }
  std::string dir_;
  std::vector<ir::ParamTensor> model_ = {{"fc1.weight", {3, 4}}, {"fc1.bias", {3}}, {"fc2.weight", {2, 3}}};
};

TEST_F(WeightMapFiles, FromFileReadsAndRefusesBeforeReadingTooMuch) {
  EXPECT_EQ(WeightMap::fromFile(write("ok.map", "a -> b\n")).apply("a"), "b");
  try {
    WeightMap::fromFile(dir_ + "/none.map");
    FAIL();
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "none.map: cannot open weight map: No such file or directory");
  }
  const std::string big = dir_ + "/big.map";
  std::ofstream(big).close();
  fs::resize_file(big, WeightMap::kMaxFileBytes + 1); // sparse: nothing to read
  try {
    WeightMap::fromFile(big);
    FAIL();
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "big.map: the weight map has 16,777,217 bytes; expected at most 16,777,216");
  }
  try {
    WeightMap::fromFile(write("bad.map", "ok -> fine\nbad\n"));
    FAIL();
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "bad.map:2:4: expected '->' after 'bad', found the end of the line");
  }
}

TEST_F(WeightMapFiles, RenamedTensorsLoadUnderTheModelsNames) {
  const std::string w = dir_ + "/w.safetensors";
  writeSafeTensors(w, {{"model.fc1.w", {3, 4}, std::vector<float>(12, 1.5f)},
                       {"model.fc1.b", {3}, {1, 2, 3}},
                       {"model.fc2.w", {2, 3}, std::vector<float>(6, -2.0f)}});
  runtime::WeightStore s =
      runtime::WeightStore::fromSafeTensors(model_, w, "m", WeightMap::parse("model.* -> *\n*.w -> *.weight\n*.b -> *.bias", "m.map"));
  EXPECT_EQ(s.get("fc1.bias").values().vec(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(s.get("fc2.weight").values().vec(), std::vector<float>(6, -2.0f));
  EXPECT_EQ(s.get("fc1.weight").shape, (std::vector<int64_t>{3, 4}));
}

TEST_F(WeightMapFiles, ErrorsNameTheFilesNameAndTheMappedOne) {
  const std::string w = dir_ + "/w.safetensors";
  writeSafeTensors(w, {{"model.fc1.weight", {4, 3}, std::vector<float>(12)},
                       {"model.fc1.bias", {3}, std::vector<float>(3)},
                       {"model.fc2.weight_proj", {2, 3}, std::vector<float>(6)},
                       {"extra.x", {1}, {0}}});
  std::string e = loadError(w, "model.* -> *\n");
  EXPECT_CONTAINS(e, "w.safetensors: weights do not match model 'm' (names renamed by m.map):");
  EXPECT_CONTAINS(e, "tensor 'fc1.weight' (the file's 'model.fc1.weight') has shape [4, 3], expected [3, 4]");
  EXPECT_CONTAINS(e, "missing tensor 'fc2.weight': expected shape [2, 3]; no tensor of the file maps to it (the "
                     "nearest name m.map makes is 'fc2.weight_proj' (the file's 'model.fc2.weight_proj'))");
  EXPECT_CONTAINS(e, "2 tensors the model does not have: 'extra.x', 'fc2.weight_proj' (the file's 'model.fc2.weight_proj')");

  // A model name the file has, renamed away by the map.
  const std::string w2 = dir_ + "/w2.safetensors";
  writeSafeTensors(w2, {{"fc1.weight", {3, 4}, std::vector<float>(12)},
                        {"fc1.bias", {3}, std::vector<float>(3)},
                        {"fc2.weight", {2, 3}, std::vector<float>(6)}});
  EXPECT_CONTAINS(loadError(w2, "fc2.* -> head.*\n"),
                  "missing tensor 'fc2.weight': expected shape [2, 3]; the file's 'fc2.weight' is renamed to "
                  "'head.weight' by m.map");
  // Nothing near: said so.
  EXPECT_CONTAINS(loadError(w2, "fc2.* -> zzzzzzzzzzzzzzzzzzzzzzzzzz\n"),
                  "missing tensor 'fc2.weight': expected shape [2, 3]; the file's 'fc2.weight' is renamed to");
  EXPECT_CONTAINS(loadError(w, "model.fc2.* -> qqqqqqqqqqqqqqqqq\nmodel.* -> *\n"),
                  "missing tensor 'fc2.weight': expected shape [2, 3]; no tensor of the file maps to it under m.map");
}

// A [in, 3·out] tensor stored as GPT-2's Conv1D stores c_attn: transposed, then split
// in three, it loads as q, k and v [out, in]; its bias splits alike; a dropped buffer is
// no extra tensor. Shapes a rule cannot reshape are errors naming the tensor.
TEST_F(WeightMapFiles, TransposedAndSplitTensorsLoadAsTheModelsLayers) {
  const std::vector<ir::ParamTensor> model = {{"a.q.weight", {2, 3}}, {"a.k.weight", {2, 3}}, {"a.v.weight", {2, 3}},
                                              {"a.q.bias", {2}},      {"a.k.bias", {2}},      {"a.v.bias", {2}}};
  std::vector<float> joined(3 * 6); // [in 3, out 6]: element (i, o) = 10 i + o
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 6; ++o) joined[size_t(i * 6 + o)] = float(10 * i + o);
  const std::string w = dir_ + "/c.safetensors";
  writeSafeTensors(w, {{"a.c_attn.weight", {3, 6}, joined},
                       {"a.c_attn.bias", {6}, {0, 1, 2, 3, 4, 5}},
                       {"a.mask", {2, 2}, {1, 0, 1, 1}}});
  const WeightMap map = WeightMap::parse("*.c_attn.weight -> *.{q,k,v}.weight transposed\n"
                                         "*.c_attn.bias -> *.{q,k,v}.bias\n*.mask -> -\n",
                                         "gpt.map");
  // Written an hour ago, so that the file has an identity (MappedFile: a file written in
  // the last seconds may still change) and the store names the map's rules in its own.
  fs::last_write_time(w, fs::file_time_type::clock::now() - std::chrono::hours(1));
  runtime::WeightStore s = runtime::WeightStore::fromSafeTensors(model, w, "m", map);
  EXPECT_EQ(s.get("a.q.weight").values().vec(), (std::vector<float>{0, 10, 20, 1, 11, 21})); // out 0 and 1
  EXPECT_EQ(s.get("a.k.weight").values().vec(), (std::vector<float>{2, 12, 22, 3, 13, 23}));
  EXPECT_EQ(s.get("a.v.weight").values().vec(), (std::vector<float>{4, 14, 24, 5, 15, 25}));
  EXPECT_EQ(s.get("a.v.bias").values().vec(), (std::vector<float>{4, 5}));
  // The weight cache keys packed weights by it: transposed or not are different weights.
  EXPECT_NE(s.identity().find("\n*.c_attn.weight -> *.{q,k,v}.weight transposed\n"), std::string::npos) << s.identity();

  const auto error = [&](const std::string &mapText) {
    try {
      runtime::WeightStore::fromSafeTensors(model, w, "m", WeightMap::parse(mapText, "gpt.map"));
    } catch (const UserError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Without 'transposed' the parts are [1, 6] rows of the stored [3, 6]: the message
  // gives the shape the map made.
  EXPECT_CONTAINS(error("*.c_attn.weight -> *.{q,k,v}.weight\n*.c_attn.bias -> *.{q,k,v}.bias\n*.mask -> -\n"),
                  "tensor 'a.q.weight' (the file's 'a.c_attn.weight') has shape [1, 6] as the weight map reshapes it, "
                  "expected [2, 3]");
  EXPECT_CONTAINS(error("*.c_attn.weight -> *.{q,k,v}.weight transposed\n*.c_attn.bias -> *.{q,k,v}.bias transposed\n"
                        "*.mask -> -\n"),
                  "tensor 'a.q.bias' (the file's 'a.c_attn.bias'): gpt.map reshapes it, but 'transposed' takes a 2-D "
                  "tensor, and it has shape [6]");
  EXPECT_CONTAINS(error("*.c_attn.weight -> *.{q,k,v,x}.weight transposed\n*.c_attn.bias -> *.{q,k,v}.bias\n"
                        "*.mask -> -\n"),
                  "gpt.map reshapes it, but a split in 4 along the first axis takes a tensor whose first axis is a "
                  "multiple of 4, and it has shape [6, 3]");
  // Without the drop, the buffer is an extra tensor; the hint for a tensor stored [in, out].
  EXPECT_CONTAINS(error("*.c_attn.weight -> *.{q,k,v}.weight transposed\n*.c_attn.bias -> *.{q,k,v}.bias\n"),
                  "1 tensor the model does not have: 'a.mask'");
  const std::string w2 = dir_ + "/c2.safetensors";
  writeSafeTensors(w2, {{"a.q.weight", {3, 2}, std::vector<float>(6)}});
  try {
    runtime::WeightStore::fromSafeTensors({{"a.q.weight", {2, 3}}}, w2, "m");
    FAIL();
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "has shape [3, 2], expected [2, 3] (transposed: PyTorch's layout is [out, in]; a weight "
                              "map's rule ending in 'transposed' reads a tensor stored [in, out])");
  }
}

TEST_F(WeightMapFiles, TwoTensorsMappedToOneNameAreAnError) {
  const std::string w = dir_ + "/w.safetensors";
  writeSafeTensors(w, {{"fc1.weight", {3, 4}, std::vector<float>(12)},
                       {"model.fc1.weight", {3, 4}, std::vector<float>(12)},
                       {"fc1.bias", {3}, std::vector<float>(3)},
                       {"fc2.weight", {2, 3}, std::vector<float>(6)}});
  EXPECT_CONTAINS(loadError(w, "model.* -> *\n"),
                  "tensors 'fc1.weight' and 'model.fc1.weight' of the file both map to 'fc1.weight' under m.map");
  // Without a map the same file only has an extra tensor, as before.
  try {
    runtime::WeightStore::fromSafeTensors(model_, w, "m");
    FAIL();
  } catch (const UserError &e) {
    EXPECT_CONTAINS(e.what(), "1 tensor the model does not have: 'model.fc1.weight'");
    EXPECT_EQ(std::string(e.what()).find("renamed"), std::string::npos);
  }
}

} // namespace
