#include "runtime/model/WeightStore.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

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
                                         const std::string &model, const WeightMap &map,
                                         const std::map<std::string, std::string> &tiedTensors) {
  return fromSafeTensors(tensors, SafeTensorsFile::open(path), model, map, tiedTensors);
}

namespace {
constexpr size_t kShown = 8; // names listed (and hints searched) per kind of problem

// 'layers.0.q.weight', or 'layers.0.q.weight' (the file's 'model.layers.0.q_proj.weight') when renamed.
std::string named(const std::string &mapped, const std::string &original) {
  if (mapped == original) return fmt::format("'{}'", clipped(mapped));
  return fmt::format("'{}' (the file's '{}')", clipped(mapped), clipped(original));
}

// For a model tensor no file tensor maps to: what the map did with a file tensor of that
// very name, else the unused mapped name sharing the most of its start and end (a rule
// that did not apply leaves `q_proj` where `q` was expected, or `model.` in front).
std::string missingHint(const std::string &name, const SafeTensorsFile &file, const WeightMap &map,
                        const std::map<std::string, std::string> &originalOf,
                        const std::map<std::string, std::vector<int64_t>> &expected) {
  if (file.has(name)) {
    const std::string to = map.apply(name);
    return to.empty() ? fmt::format("; the file's '{}' is dropped by {}", clipped(name), map.name())
                      : fmt::format("; the file's '{}' is renamed to '{}' by {}", clipped(name), clipped(to), map.name());
  }
  const std::string *best = nullptr;
  size_t bestScore = 0;
  for (const auto &[mapped, original] : originalOf) {
    if (expected.count(mapped)) continue;
    const size_t most = std::min(name.size(), mapped.size());
    size_t prefix = 0, suffix = 0;
    while (prefix < most && name[prefix] == mapped[prefix]) ++prefix;
    while (suffix < most - prefix && name[name.size() - 1 - suffix] == mapped[mapped.size() - 1 - suffix]) ++suffix;
    if (prefix + suffix > bestScore) bestScore = prefix + suffix, best = &mapped;
  }
  if (!best || 2 * bestScore < name.size()) return fmt::format("; no tensor of the file maps to it under {}", map.name());
  return fmt::format("; no tensor of the file maps to it (the nearest name {} makes is {})", map.name(),
                     named(*best, originalOf.at(*best)));
}
// A file tensor's shape once a weight map's rule reshapes it (`how`: transposed, then
// one of `parts` along the first axis), or what keeps the rule from applying.
std::string reshapedShape(std::vector<int64_t> &shape, const WeightMap::Mapped &how) {
  if (how.transposed) {
    if (shape.size() != 2) return fmt::format("'transposed' takes a 2-D tensor, and it has shape [{}]", fmt::join(shape, ", "));
    std::swap(shape[0], shape[1]);
  }
  if (how.parts > 1 && (shape.empty() || shape[0] % how.parts != 0))
    return fmt::format("a split in {} along the first axis takes a tensor whose first axis is a multiple of {}, and it "
                       "has shape [{}]",
                       how.parts, how.parts, fmt::join(shape, ", "));
  if (how.parts > 1) shape[0] /= how.parts;
  return "";
}

// f32 values of a file tensor as the model sees it: where they lie when stored as f32
// and not reshaped, else converted, transposed or cut into `copy`.
llvm::ArrayRef<float> valuesOf(const SafeTensorsFile &file, const std::string &name, const WeightMap::Mapped *how,
                               std::vector<float> &copy) {
  if (!how || !how->reshaped()) {
    if (const float *inPlace = file.f32InPlace(name)) return {inPlace, size_t(file.info(name).elementCount())};
    copy = file.readF32(name);
    return copy;
  }
  std::vector<float> converted; // the stored values (read where they lie when f32)
  const llvm::ArrayRef<float> all = valuesOf(file, name, nullptr, converted);
  const std::vector<int64_t> &stored = file.info(name).shape;
  // The part's rows of the tensor as the model sees it ([rows, cols]; transposed: rows
  // are the stored columns), gathered straight from the stored values.
  const size_t rows = size_t(how->transposed ? stored[1] : stored[0]), cols = rows ? all.size() / rows : 0;
  const size_t partRows = rows / size_t(how->parts), first = partRows * size_t(how->part);
  copy.resize(partRows * cols);
  for (size_t r = 0; r < partRows; ++r)
    for (size_t c = 0; c < cols; ++c)
      copy[r * cols + c] = how->transposed ? all[c * rows + first + r] : all[(first + r) * cols + c];
  return copy;
}

// A file holding both a tied dense's weight and the embedding's table it reads: what
// keeps them from being one table (their shapes, or the first element that differs), or "".
std::string tiedCopiesDiffer(const SafeTensorsFile &file, const WeightMap &map, const std::string &head,
                             const std::string &headOriginal, const std::string &table, const std::string &tableOriginal,
                             const std::map<std::string, WeightMap::Mapped> &reshaped) {
  const auto howOf = [&](const std::string &name) {
    auto it = reshaped.find(name);
    return it == reshaped.end() ? nullptr : &it->second;
  };
  const std::string dense = head.substr(0, head.rfind('.')), embedding = table.substr(0, table.rfind('.'));
  const std::string why = fmt::format("but '{}' is tied to '{}' (tie=): it reads the embedding's table, so a file "
                                      "that holds both must hold them equal (without tie=, '{}' has a weight of its own)",
                                      clipped(dense), clipped(embedding), clipped(dense));
  const auto &a = file.info(headOriginal), &b = file.info(tableOriginal);
  std::vector<int64_t> shapeA = a.shape, shapeB = b.shape;
  // A rule that cannot reshape the table is reported with the table; the head's copy is
  // not loaded, so here.
  if (howOf(head))
    if (std::string cannot = reshapedShape(shapeA, *howOf(head)); !cannot.empty())
      return fmt::format("tensor {}: {} reshapes it, but {}", named(head, headOriginal), map.name(), cannot);
  if (howOf(table) && !reshapedShape(shapeB, *howOf(table)).empty()) return "";
  if (shapeA != shapeB)
    return fmt::format("tensor {} has shape [{}] and {} has [{}], {}", named(head, headOriginal), fmt::join(shapeA, ", "),
                       named(table, tableOriginal), fmt::join(shapeB, ", "), why);
  if (!a.floatDType) // (the table's own dtype is checked where it loads)
    return fmt::format("tensor {} holds {}, not floats, {}", named(head, headOriginal), a.dtype, why);
  if (!b.floatDType) return "";
  std::vector<float> copyA, copyB;
  const llvm::ArrayRef<float> x = valuesOf(file, headOriginal, howOf(head), copyA),
                              y = valuesOf(file, tableOriginal, howOf(table), copyB);
  const size_t at = size_t(std::mismatch(x.begin(), x.end(), y.begin(), [](float p, float q) {
                             return std::memcmp(&p, &q, sizeof p) == 0;
                           }).first - x.begin());
  if (at == x.size()) return "";
  std::vector<int64_t> index(shapeA.size());
  for (size_t d = shapeA.size(), rest = at; d-- > 0;) index[d] = int64_t(rest % size_t(shapeA[d])), rest /= size_t(shapeA[d]);
  return fmt::format("tensor {} differs from {} at [{}] ({} against {}), {}", named(head, headOriginal),
                     named(table, tableOriginal), fmt::join(index, ", "), x[at], y[at], why);
}
} // namespace

WeightStore WeightStore::fromSafeTensors(const std::vector<ir::ParamTensor> &tensors, const SafeTensorsFile &file,
                                         const std::string &model, const WeightMap &map,
                                         const std::map<std::string, std::string> &tiedTensors) {
  const std::string &path = file.path();
  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto &p : tensors) expected[p.name] = p.shape;
  std::vector<std::string> problems;
  // The file's tensors by the name the model sees (the weight map applied).
  std::map<std::string, std::string> originalOf;
  std::set<std::string> clashed; // reported once, not again as mis-shaped
  size_t clashes = 0;
  std::map<std::string, WeightMap::Mapped> reshaped; // by mapped name: the tensors a rule transposes or splits
  size_t names = 0;
  for (const auto &name : file.names())
    for (WeightMap::Mapped &m : map.map(name)) {
      if (++names > WeightMap::kMaxMappedNames)
        throw UserError(fmt::format("{}: {} makes more than {} tensor names of the file's {} tensors", path, map.name(),
                                    withCommas(int64_t(WeightMap::kMaxMappedNames)),
                                    withCommas(int64_t(file.names().size()))));
      auto [it, fresh] = originalOf.emplace(m.name, name);
      if (!fresh) clashed.insert(m.name);
      if (!fresh && clashes++ < kShown)
        problems.push_back(fmt::format("tensors '{}' and '{}' of the file both map to '{}' under {}",
                                       clipped(it->second), clipped(name), clipped(m.name), map.name()));
      if (fresh && m.reshaped()) reshaped.emplace(m.name, std::move(m));
    }
  if (clashes > kShown) problems.push_back(fmt::format("... and {} more tensors map to a name already taken", clashes - kShown));
  // A tied dense reads its embedding's table (docs/language-notes.md, tie=). PyTorch's
  // state_dict() holds that table under both names, and a file saved from it may keep
  // only the dense's: either name loads the table, and a file with both must hold one table.
  for (const auto &[head, table] : tiedTensors) {
    auto alias = originalOf.find(head);
    if (alias == originalOf.end() || expected.count(head) || !expected.count(table) || clashed.count(head) ||
        clashed.count(table))
      continue;
    auto own = originalOf.find(table);
    if (own == originalOf.end()) {
      originalOf.emplace(table, alias->second);
      if (auto how = reshaped.find(head); how != reshaped.end()) reshaped.emplace(table, how->second);
    } else if (std::string differ = tiedCopiesDiffer(file, map, head, alias->second, table, own->second, reshaped);
               !differ.empty()) {
      problems.push_back(differ);
    }
    originalOf.erase(alias);
  }
  size_t hints = 0;
  for (const auto &[name, shape] : expected) {
    auto found = originalOf.find(name);
    if (found == originalOf.end()) {
      problems.push_back(fmt::format("missing tensor '{}': expected shape [{}]{}", name, fmt::join(shape, ", "),
                                     map.empty() || hints++ >= kShown ? ""
                                                                      : missingHint(name, file, map, originalOf, expected)));
      continue;
    }
    const auto &info = file.info(found->second);
    std::vector<int64_t> fileShape = info.shape;
    if (auto how = reshaped.find(name); how != reshaped.end())
      if (std::string why = reshapedShape(fileShape, how->second); !why.empty()) {
        problems.push_back(fmt::format("tensor {}: {} reshapes it, but {}", named(name, found->second), map.name(), why));
        continue;
      }
    // A layout hint where it can be told: 4 axes are a conv's weight (groups divide its
    // in); a matrix stored the other way round, [in, out], is transposed.
    const bool transposed = shape.size() == 2 && fileShape.size() == 2 && fileShape[0] == shape[1] &&
                            fileShape[1] == shape[0];
    const char *layout = shape.size() == 4 ? " (PyTorch layout: conv [out, in/groups, kh, kw])"
                         : transposed ? " (transposed: PyTorch's layout is [out, in]; a weight map's rule ending in "
                                        "'transposed' reads a tensor stored [in, out])"
                                      : "";
    if (fileShape != shape && !clashed.count(name))
      problems.push_back(fmt::format("tensor {} has shape [{}]{}, expected [{}]{}", named(name, found->second),
                                     fmt::join(fileShape, ", "), reshaped.count(name) ? " as the weight map reshapes it" : "",
                                     fmt::join(shape, ", "), layout));
  }
  // PyTorch's batchnorm keeps a count of its training steps in every state_dict();
  // inference does not read it, so a batchnorm's is not an extra tensor.
  const auto trainingCounter = [&](const std::string &name) {
    const std::string suffix = ".num_batches_tracked";
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
           expected.count(name.substr(0, name.size() - suffix.size()) + ".running_mean");
  };
  std::vector<std::string> extra, shownExtra;
  for (const auto &[mapped, original] : originalOf)
    if (!expected.count(mapped) && !trainingCounter(mapped)) {
      if (extra.size() < kShown) shownExtra.push_back(named(mapped, original));
      extra.push_back(mapped);
    }
  if (!extra.empty()) {
    std::vector<std::string> missing; // a suggestion is a name the model still lacks
    for (const auto &[n, s] : expected)
      if (!originalOf.count(n)) missing.push_back(n);
    std::string hint = closestMatch(extra.front(), missing);
    problems.push_back(fmt::format("{} tensor{} the model does not have: {}{}", extra.size(),
                                   extra.size() == 1 ? "" : "s", fmt::join(shownExtra, ", "),
                                   hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
  }
  if (!problems.empty())
    throw UserError(fmt::format("{}: weights do not match model '{}'{}:\n  {}", path, model,
                                map.empty() ? "" : fmt::format(" (names renamed by {})", map.name()),
                                fmt::join(problems, "\n  ")));
  WeightStore store;
  store.file_ = file.storage();
  store.mapping_ = file.mapping();
  if (!file.identity().empty()) {
    store.identity_ = "file " + file.identity();
    for (const WeightMap::Rule &r : map.rules())
      store.identity_ += fmt::format("\n{} -> {}{}", r.from, r.to, r.transposed ? " transposed" : "");
  }
  for (const auto &[name, shape] : expected) {
    const std::string &original = originalOf.at(name);
    const auto how = reshaped.find(name);
    const float *inPlace = how == reshaped.end() ? file.f32InPlace(original) : nullptr;
    std::vector<float> values;
    if (!inPlace) (void)valuesOf(file, original, how == reshaped.end() ? nullptr : &how->second, values);
    store.tensors_[name] = inPlace ? Tensor{shape, inPlace, size_t(file.info(original).elementCount())}
                                   : Tensor{shape, std::move(values)};
    if (original != name || how != reshaped.end())
      store.origins_[name] = {original, how == reshaped.end() ? WeightMap::Mapped{} : how->second};
  }
  return store;
}

std::string WeightStore::fileElement(const std::string &name, const std::vector<int64_t> &index) const {
  const auto origin = origins_.find(name);
  if (origin == origins_.end()) return "";
  const WeightMap::Mapped &how = origin->second.how;
  std::vector<int64_t> at = index; // the part's row within the whole, then the stored axes
  if (how.parts > 1 && !at.empty()) at[0] += how.part * get(name).shape[0];
  if (how.transposed && at.size() == 2) std::swap(at[0], at[1]);
  return fmt::format(" (the file's '{}' [{}])", clipped(origin->second.name), fmt::join(at, ", "));
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
    std::vector<float> values(size_t(p.count()));
    if (p.init != ir::ParamTensor::Init::Uniform) {
      std::fill(values.begin(), values.end(), p.init == ir::ParamTensor::Init::Ones ? 1.0f : 0.0f);
    } else {
      double bound = 1.0 / std::sqrt(double(std::max<int64_t>(p.fanIn, 1)));
      uint64_t state = seed ^ fnv1a(p.name);
      for (float &v : values) {
        double u = double(splitmix64(state) >> 11) * 0x1.0p-53; // [0, 1)
        v = float((2 * u - 1) * bound);
      }
    }
    store.tensors_[p.name] = Tensor{p.shape, std::move(values)};
  }
  return store;
}

bool WeightStore::readRows(const float *const *rows, int64_t count, int64_t K, float *to) const {
  if (!mapping_) return false;
  for (int64_t first = 0, end; first < count; first = end) {
    for (end = first + 1; end < count && rows[end] == rows[end - 1] + K;) ++end;
    if (!mapping_->read(rows[first], size_t((end - first) * K) * sizeof(float), to + first * K)) return false;
  }
  return true;
}

} // namespace nnc::runtime
