#include <gtest/gtest.h>

#include "CompileHelpers.h"

using nnc::test::compile;

TEST(Parser, AcceptsTheLanguageExamples) {
  auto c = compile(R"(
    # comment
    let d = 4_096 / 2
    block pair(w, extra = 1) { dense(w + extra) relu }
    model m(hidden = 8) {
      input x: f32[16,];  pair(hidden) pair(w = 4, extra = 0)
      dense(2, bias = false, dtype = f16)
    })");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.graph->ops.back().type.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.graph->ops.back().weightDType, nnc::DType::F16);
  EXPECT_EQ(c.op("0")->attrs.out, 9);
  EXPECT_EQ(c.op("2")->attrs.out, 4);
}

TEST(Parser, SyntaxErrorsSayExpectedAndFound) {
  auto c = compile("model m {\n  input x: [4\n  dense(2)\n}\n");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("test.nn:3:3"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("expected"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("found 'dense'"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("^"), std::string::npos);
}

TEST(Parser, ReportsSeveralIndependentErrors) {
  auto c = compile("model m {\n input x: [4]\n desne(3)\n dense(2, biass=true)\n}\n");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("did you mean 'dense'"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("did you mean 'bias'"), std::string::npos) << c.diagnostics;
}

TEST(Parser, RejectsDeepNestingWithoutRecursing) {
  std::string src = "model m { input x: [" + std::string(5000, '(') + "1" + std::string(5000, ')') + "] }";
  auto c = compile(src);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("nested too deeply"), std::string::npos) << c.diagnostics;
}

TEST(Parser, BinaryGarbageIsAnErrorNotACrash) {
  std::string src;
  for (int i = 0; i < 4000; ++i) src += char((i * 7919) % 256);
  auto c = compile(src);
  EXPECT_FALSE(c.ok);
  EXPECT_FALSE(c.diagnostics.empty());
}

TEST(Parser, EndOfFileErrorsPointAtTheUnclosedBracket) {
  auto c = compile("model m {\n  input x: [4]\n  dense(2)\n\n\n");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("test.nn:3:10: error"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("test.nn:1:9: note: the '{' opened here is never closed"), std::string::npos)
      << c.diagnostics;
}
