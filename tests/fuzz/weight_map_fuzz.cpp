// Weight maps under libFuzzer (runtime/io/WeightMap.h): the bytes are a map's text.
// Parsing may only end in a UserError. A map that parses is applied to LlamaForCausalLM's
// names and to the input's own first lines (as names), checking every match against its
// definition: each '*' took one or more characters and FROM with the captures put back
// is the name. Then the loader matches a small .safetensors of those names to a LLaMA
// layer's parameters through the map; only a UserError may leave it.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/support/Error.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/WeightMap.h"
#include "runtime/model/WeightStore.h"

namespace {
using nnc::runtime::WeightMap;

// A match is what it claims to be; traps otherwise.
void checkMatch(const std::string &pattern, const std::string &name) {
  auto captures = nnc::runtime::matchWeightPattern(pattern, name);
  if (!captures) return;
  std::string rebuilt;
  size_t star = 0;
  for (char c : pattern) {
    if (c != '*') {
      rebuilt += c;
      continue;
    }
    if (star >= captures->size() || (*captures)[star].empty()) __builtin_trap();
    rebuilt += (*captures)[star++];
  }
  if (star != captures->size() || rebuilt != name) __builtin_trap();
}

std::string safetensorsOf(const std::vector<std::string> &names) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto &n : names) {
    header[n] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {offset, offset + 8}}};
    offset += 8;
  }
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint64_t(text.size()) >> (8 * i) & 0xff);
  return bytes + text + std::string(offset, '\0');
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace nnc;
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  WeightMap map;
  try {
    map = WeightMap::parse(text, "fuzz.map");
  } catch (const UserError &) {
    return 0;
  }
  std::vector<std::string> names = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                                    "model.layers.0.mlp.gate_proj.weight", "model.norm.weight", "lm_head.weight"};
  for (size_t start = 0, lines = 0; start < text.size() && lines < 8; ++lines) {
    size_t end = std::min(text.find('\n', start), text.size());
    if (end > start) names.emplace_back(text.substr(start, std::min<size_t>(end - start, 512)));
    start = end + 1;
  }
  for (const auto &name : names) {
    for (const auto &rule : map.rules()) checkMatch(rule.from, name);
    try {
      const std::string mapped = map.apply(name);
      if (mapped.empty() || mapped.size() > name.size() + WeightMap::kMaxGrowthBytes) __builtin_trap();
    } catch (const UserError &) {
    }
  }
  std::vector<ir::ParamTensor> params = {{"embed_tokens.weight", {2}}, {"layers.0.self_attn.q.weight", {2}},
                                         {"layers.0.mlp.gate.weight", {2}}, {"norm.weight", {2}}};
  try {
    std::string bytes = safetensorsOf(names);
    SafeTensorsFile file = SafeTensorsFile::fromBytes("fuzz.safetensors", std::vector<uint8_t>(bytes.begin(), bytes.end()));
    runtime::WeightStore::fromSafeTensors(params, file, "m", map);
  } catch (const UserError &) {
  }
  return 0;
}
