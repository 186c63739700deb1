// Weight names checked against PyTorch: each tests/fixtures/names/*.json (written by
// tools/fixtures/make_name_fixtures.py) holds a .nn program and the state_dict() keys
// and shapes of the same model built as PyTorch modules. nnc must produce exactly those
// tensors, in the order the layers run ("execution_order"). state_dict() order itself
// can differ: PyTorch lists a module's keys where the module was first registered, so
// the iterations that a later unnamed repeat appends to an earlier `layers` list come
// before the layers between them; hence the keys are also compared as sorted lists,
// with their shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "CompileHelpers.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path namesDir() { return fs::path(NNC_SOURCE_DIR) / "tests" / "fixtures" / "names"; }

std::vector<std::string> fixtureNames() {
  std::vector<std::string> out;
  for (const auto &e : fs::directory_iterator(namesDir()))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

class NameFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(NameFixtures, MatchPyTorchStateDict) {
  std::ifstream in(namesDir() / (GetParam() + ".json"));
  ASSERT_TRUE(in) << GetParam();
  json fx = json::parse(in);
  auto c = nnc::test::compile(fx.at("nn").get<std::string>());
  ASSERT_TRUE(c.ok) << c.diagnostics;

  using Tensor = std::pair<std::string, std::vector<int64_t>>;
  std::vector<std::string> order;
  std::vector<Tensor> got;
  for (const auto &op : c.graph->ops)
    for (const auto &p : op.params) {
      order.push_back(p.name);
      got.emplace_back(p.name, p.shape);
    }
  EXPECT_EQ(order, fx.at("execution_order").get<std::vector<std::string>>());

  std::vector<Tensor> want;
  for (const auto &e : fx.at("state_dict")) want.emplace_back(e[0], e[1].get<std::vector<int64_t>>());
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);

  auto shape = c.graph->op(c.graph->output).type.shape; // with the batch axis
  shape.erase(shape.begin());
  EXPECT_EQ(shape, fx.at("output_shape").get<std::vector<int64_t>>());
}

INSTANTIATE_TEST_SUITE_P(PyTorch, NameFixtures, ::testing::ValuesIn(fixtureNames()),
                         [](const ::testing::TestParamInfo<std::string> &info) { return info.param; });

TEST(NameFixtures, AllPresent) {
  EXPECT_GE(fixtureNames().size(), 5u); // every case the script writes, not an empty directory
}

} // namespace
