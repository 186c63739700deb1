#include "runtime/model/WeightStore.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/io/SafeTensors.h"

namespace nnc::runtime {

const Tensor &WeightStore::get(const std::string &name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::logic_error("weight store has no tensor " + name);
  return it->second;
}

WeightStore WeightStore::fromSafeTensors(const std::vector<ir::ParamTensor> &tensors, const std::string &path,
                                         const std::string &model) {
  return fromSafeTensors(tensors, SafeTensorsFile::open(path), model);
}

WeightStore WeightStore::fromSafeTensors(const std::vector<ir::ParamTensor> &tensors, const SafeTensorsFile &file,
                                         const std::string &model) {
  const std::string &path = file.path();
  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto &p : tensors) expected[p.name] = p.shape;
  std::vector<std::string> problems;
  for (const auto &[name, shape] : expected) {
    if (!file.has(name)) {
      problems.push_back(fmt::format("missing tensor '{}': expected shape [{}]", name, fmt::join(shape, ", ")));
      continue;
    }
    const auto &info = file.info(name);
    // The layout hint by the expected rank: 4 is a conv's weight (groups divide its in).
    const char *layout = shape.size() == 4 ? "conv [out, in/groups, kh, kw]" : "dense [out, in]";
    if (info.shape != shape)
      problems.push_back(fmt::format("tensor '{}' has shape [{}], expected [{}] (PyTorch layout: {})", name,
                                     fmt::join(info.shape, ", "), fmt::join(shape, ", "), layout));
  }
  std::vector<std::string> extra;
  for (const auto &name : file.names())
    if (!expected.count(name)) extra.push_back(name);
  std::vector<std::string> shownExtra;
  for (size_t i = 0; i < extra.size() && i < 8; ++i) shownExtra.push_back(clipped(extra[i]));
  if (!extra.empty()) {
    std::vector<std::string> known;
    for (const auto &[n, s] : expected) known.push_back(n);
    std::string hint = closestMatch(extra.front(), known);
    problems.push_back(fmt::format("{} tensor{} the model does not have: {}{}", extra.size(),
                                   extra.size() == 1 ? "" : "s", fmt::join(shownExtra, ", "),
                                   hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
  }
  if (!problems.empty())
    throw UserError(fmt::format("{}: weights do not match model '{}':\n  {}", path, model,
                                fmt::join(problems, "\n  ")));
  WeightStore store;
  for (const auto &[name, shape] : expected) store.tensors_[name] = Tensor{shape, file.readF32(name)};
  return store;
}

namespace {
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}
} // namespace

WeightStore WeightStore::random(const std::vector<ir::ParamTensor> &tensors, uint64_t seed) {
  WeightStore store;
  for (const auto &p : tensors) {
    Tensor t{p.shape, std::vector<float>(size_t(p.count()))};
    if (p.init != ir::ParamTensor::Init::Uniform) {
      std::fill(t.values.begin(), t.values.end(), p.init == ir::ParamTensor::Init::Ones ? 1.0f : 0.0f);
    } else {
      double bound = 1.0 / std::sqrt(double(std::max<int64_t>(p.fanIn, 1)));
      uint64_t state = seed ^ fnv1a(p.name);
      for (float &v : t.values) {
        double u = double(splitmix64(state) >> 11) * 0x1.0p-53; // [0, 1)
        v = float((2 * u - 1) * bound);
      }
    }
    store.tensors_[p.name] = std::move(t);
  }
  return store;
}

} // namespace nnc::runtime
