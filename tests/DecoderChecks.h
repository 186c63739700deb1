// Shared by the decoder tests (tests/runtime/DecoderTest.cpp, HfCheckpointTest.cpp,
// tests/api/DecoderApiTest.cpp): reading fixtures, the last position of full passes,
// and the tolerance decode steps are held to against them.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace nnc::testing {

inline std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fixture's .nn (tests/fixtures/models) with its fixed sequence length made the model
// parameter `seq` (a decoder compiles it at several lengths).
inline std::string withSeqParameter(const std::string &source) {
  std::string s = std::regex_replace(source, std::regex(R"(model (\w+) \{)"), "model $1(seq = 17) {");
  return std::regex_replace(s, std::regex(R"(i32\[\d+\])"), "i32[seq]");
}

// The logits of the last position of each batch row of a full pass's [batch, len, vocab].
inline std::vector<float> lastPositions(const std::vector<float> &out, int64_t batch, int64_t len, int64_t vocab) {
  std::vector<float> last;
  for (int64_t b = 0; b < batch; ++b)
    last.insert(last.end(), out.begin() + (b * len + len - 1) * vocab, out.begin() + (b * len + len) * vocab);
  return last;
}

// Decoded logits equal a full pass's (f32): 1e-5 relative, absolute below 1.
inline void expectLogitsClose(const std::vector<float> &got, const std::vector<float> &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << what << " logit " << i;
}

} // namespace nnc::testing
