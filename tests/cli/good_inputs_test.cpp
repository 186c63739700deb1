// Valid programs at the edges of the lexical and syntactic rules (LANGUAGE.md §1-§3):
// each must pass `nnc --check` with exit 0 and no error. The counterpart of the
// bad-input corpus: the checks that reject bad input must not reject these.
#include <gtest/gtest.h>

#include "NncProcess.h"

namespace {
using nnc_cli_test::Result;
using nnc_cli_test::runNnc;
using nnc_cli_test::TempDir;

struct GoodProgram {
  const char *name;
  std::string text;
  std::vector<std::string> args;
};

// Names the parameter in CTest's listing instead of dumping its bytes.
void PrintTo(const GoodProgram &p, std::ostream *os) { *os << p.name; }

// Comments may hold anything: invalid UTF-8, NUL, control bytes, valid UTF-8.
const char kCommentBytes[] = "# caf\xc3\xa9 \xff\xfe \x01\x7f bytes\nmodel m { # \x80\x81\x00 nul\n"
                             "  input x: [4] # \xe2\x82\xac\n  dense(3)  #\n}\n# last line without newline \xff";

std::vector<GoodProgram> goodPrograms() {
  return {
      // Comments may hold anything: invalid UTF-8, NUL, control bytes, valid UTF-8.
      {"comment_bytes", std::string(kCommentBytes, sizeof kCommentBytes - 1), {}},
      {"semicolons", "let a = 2; let b = 3;\nmodel m {\n  input x: [4]; dense(a * b); relu; dense(1);;\n};\n", {}},
      {"trailing_commas",
       "block b(n, k = 2,) { dense(n * k,) relu }\nmodel m(h = 8,) {\n  input x: [4, 6,]\n  b(h, k = 3,)\n"
       "  dense(10, bias = false,)\n}\n",
       {}},
      {"digit_separators", "model m {\n  input t: i32[2_048]\n  embedding(32_000, 1_0_2_4)\n}\n", {}},
      {"activations_without_parentheses", "model m {\n  input x: [4]\n  relu gelu relu() silu identity softmax\n}\n", {}},
      {"pair_options",
       "model m {\n  input x: [3, 32, 32]\n  conv2d(8, kernel=(3, 5), stride=(1, 2), pad=(1, 2))\n"
       "  maxpool((2, 2), stride=(2, 1))\n  depthwise(kernel=(3, 3), pad=(1, 1), multiplier=2)\n}\n",
       {}},
      {"crlf_line_endings", "model m {\r\n  input x: [4]\r\n  dense(2) relu\r\n}\r\n", {}},
      // A UTF-8 byte-order mark, which Windows editors write (language-notes.md).
      {"utf8_byte_order_mark", "\xEF\xBB\xBFmodel m {\n  input x: [4]\n  dense(2)\n}\n", {}},
      {"signs_and_scopes",
       "let d = 4\nmodel m {\n  input x: [d]\n  repeat 2 { let d = 8\n dense(d) relu }\n  dense(-(-3) + +1 * 2 / 2)\n}\n",
       {}},
      {"input_only", "model m {\n  input x: [4]\n}\n", {}},
      {"repeat_zero_times", "model m {\n  input x: [4]\n  repeat 0 { dense(7) }\n  dense(2)\n}\n", {}},
      {"dropout_bounds", "model m {\n  input x: [4]\n  dropout(0) dropout(p=0.999) dropout\n}\n", {}},
      {"several_models_with_model",
       "model a {\n  input x: [4]\n}\nmodel b {\n  input x: [4]\n  dense(2)\n}\n",
       {"--model", "b"}},
      {"set_overrides_parameter", "model m(w = 3) {\n  input x: [w]\n  dense(w * 2)\n}\n", {"--set", "w=5"}},
      // language-notes.md: `batch` can be read in expressions, parameter defaults too.
      {"batch_in_parameter_default", "model m(rows = batch * 2) {\n  input x: [rows]\n  dense(2)\n}\n",
       {"--batch", "3"}},
      // Two unnamed repeats in one body append to one `layers` list: not a name clash.
      {"unnamed_repeats_share_layers",
       "model m {\n  input x: [4]\n  repeat 2 { dense(4) relu }\n  dense(4)\n  repeat 1 { dense(4) }\n}\n", {}},
      {"nesting_at_the_limit",
       "model m {\n  input x: [4]\n  dense(" + std::string(150, '(') + "1" + std::string(150, ')') + ")\n}\n", {}},
  };
}

class GoodInputs : public ::testing::TestWithParam<GoodProgram> {};

TEST_P(GoodInputs, ChecksCleanly) {
  const GoodProgram &p = GetParam();
  TempDir dir;
  std::vector<std::string> args = {dir.write(std::string(p.name) + ".nn", p.text), "--check"};
  args.insert(args.end(), p.args.begin(), p.args.end());
  Result r = runNnc(args);
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 0) << p.text << "\n" << r.describe();
  EXPECT_EQ(r.err.find("error:"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("well formed"), std::string::npos) << r.describe();
}

INSTANTIATE_TEST_SUITE_P(Edges, GoodInputs, ::testing::ValuesIn(goodPrograms()),
                         [](const ::testing::TestParamInfo<GoodProgram> &info) { return std::string(info.param.name); });

} // namespace
