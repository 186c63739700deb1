#include "runtime/model/WeightRecipes.h"

#include "compiler/codegen/PackLayout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace nnc::runtime {

namespace {
// W and b of the dense chain `layers` (each "<path>" with <path>.weight [out, in] and
// optionally <path>.bias), first layer first.
void foldChain(const std::vector<std::string> &layers, const WeightStore &w, std::vector<double> &W,
               std::vector<double> &b) {
  int64_t rows = 0, cols = 0;
  for (size_t j = 0; j < layers.size(); ++j) {
    const Tensor &Wj = w.get(layers[j] + ".weight");
    const int64_t out = Wj.shape[0], in = Wj.shape[1];
    std::vector<double> bj(size_t(out), 0.0);
    if (w.has(layers[j] + ".bias")) {
      const auto &bv = w.get(layers[j] + ".bias").values();
      for (int64_t r = 0; r < out; ++r) bj[size_t(r)] = bv[size_t(r)];
    }
    if (j == 0) {
      W.assign(Wj.values().begin(), Wj.values().end());
      b = bj;
      rows = out;
      cols = in;
      continue;
    }
    std::vector<double> nextW(size_t(out * cols), 0.0), nextB = bj;
    for (int64_t r = 0; r < out; ++r)
      for (int64_t m = 0; m < rows; ++m) {
        const double wrm = Wj.values()[size_t(r * in + m)];
        nextB[size_t(r)] += wrm * b[size_t(m)];
        for (int64_t c = 0; c < cols; ++c) nextW[size_t(r * cols + c)] += wrm * W[size_t(m * cols + c)];
      }
    W.swap(nextW);
    b.swap(nextB);
    rows = out;
  }
}
// A batchnorm's per-channel s = γ / sqrt(var + eps) and shift β − mean · s, in double.
struct NormCoefficients {
  std::vector<double> scale, mean, beta;
};
NormCoefficients normCoefficients(const std::string &norm, double eps, const WeightStore &w) {
  const auto &gamma = w.get(norm + ".weight").values(), &beta = w.get(norm + ".bias").values();
  const auto &mean = w.get(norm + ".running_mean").values(), &var = w.get(norm + ".running_var").values();
  NormCoefficients c;
  for (size_t i = 0; i < gamma.size(); ++i) {
    c.scale.push_back(double(gamma[i]) / std::sqrt(double(var[i]) + eps));
    c.mean.push_back(mean[i]);
    c.beta.push_back(beta[i]);
  }
  return c;
}

// cos and sin of position p at frequency i, computed as Hugging Face's
// LlamaRotaryEmbedding does in f32: inv_i = 1 / theta^(f32(2i) / headDim), the angle
// f32(p) · inv_i rounded to f32; only cos and sin themselves are exact (then rounded).
std::vector<double> ropeTable(int64_t positions, int64_t headDim, double theta) {
  const int64_t half = headDim / 2;
  std::vector<double> out(size_t(positions * headDim));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = float(2 * i) / float(headDim);
    const float inv = 1.0f / float(std::pow(double(float(theta)), double(exponent)));
    for (int64_t p = 0; p < positions; ++p) {
      const double angle = double(float(p) * inv);
      out[size_t(p * headDim + i)] = std::cos(angle);
      out[size_t(p * headDim + half + i)] = std::sin(angle);
    }
  }
  return out;
}

// The whole constant of `recipe`, before its rows are taken.
std::vector<double> makeWhole(const lower::WeightRecipe &recipe, const WeightStore &weights) {
  using Source = lower::WeightRecipe::Source;
  switch (recipe.source) {
  case Source::Tensor: {
    const auto &v = weights.get(recipe.tensors.at(0)).values();
    return std::vector<double>(v.begin(), v.end());
  }
  case Source::FoldedWeight:
  case Source::FoldedBias: {
    std::vector<double> W, b;
    foldChain(recipe.tensors, weights, W, b);
    return recipe.source == Source::FoldedWeight ? W : b;
  }
  case Source::NormFoldedWeight: {
    const Tensor &W = weights.get(recipe.tensors.at(0) + ".weight");
    const NormCoefficients c = normCoefficients(recipe.tensors.at(1), recipe.eps, weights);
    const size_t rowSize = W.values().size() / c.scale.size();
    std::vector<double> out(W.values().size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = double(W.values()[i]) * c.scale[i / rowSize];
    return out;
  }
  case Source::NormFoldedBias: {
    const NormCoefficients c = normCoefficients(recipe.tensors.at(1), recipe.eps, weights);
    const std::string bias = recipe.tensors.at(0) + ".bias";
    std::vector<double> out(c.scale.size());
    for (size_t o = 0; o < out.size(); ++o) {
      const double b = weights.has(bias) ? double(weights.get(bias).values()[o]) : 0.0;
      out[o] = (b - c.mean[o]) * c.scale[o] + c.beta[o];
    }
    return out;
  }
  case Source::NormScale:
  case Source::NormShift: {
    const NormCoefficients c = normCoefficients(recipe.tensors.at(0), recipe.eps, weights);
    if (recipe.source == Source::NormScale) return c.scale;
    std::vector<double> out(c.scale.size());
    for (size_t o = 0; o < out.size(); ++o) out[o] = c.beta[o] - c.mean[o] * c.scale[o];
    return out;
  }
  case Source::Concat: {
    std::vector<double> out;
    for (const std::string &t : recipe.tensors) {
      const auto &v = weights.get(t).values();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  case Source::RopeTable: return ropeTable(recipe.shape.at(0), recipe.shape.at(1), recipe.ropeTheta);
  }
  throw std::logic_error("weight recipe " + recipe.name + ": unknown source");
}
} // namespace

namespace {
// Each row's columns from (channel, tap) to (tap, channel) order (WeightRecipe::kernelTaps).
std::vector<float> tapsFirst(std::vector<float> v, const lower::WeightRecipe &recipe) {
  const int64_t taps = recipe.kernelTaps;
  if (taps <= 1) return v;
  const int64_t cols = recipe.shape.back(), rows = int64_t(v.size()) / cols, channels = cols / taps;
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t t = 0; t < taps; ++t) out[size_t(r * cols + t * channels + ch)] = v[size_t(r * cols + ch * taps + t)];
  return out;
}
// [rows, cols] to [cols, rows] when the recipe says so (WeightRecipe::transposed).
std::vector<float> transposedIfAsked(std::vector<float> v, const lower::WeightRecipe &recipe) {
  if (!recipe.transposed) return v;
  const int64_t cols = recipe.shape.back(), rows = int64_t(v.size()) / cols;
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(c * rows + r)] = v[size_t(r * cols + c)];
  return out;
}
std::vector<float> makeRows(const lower::WeightRecipe &recipe, const WeightStore &weights);
} // namespace

std::vector<float> makeConstant(const lower::WeightRecipe &recipe, const WeightStore &weights) {
  return transposedIfAsked(tapsFirst(makeRows(recipe, weights), recipe), recipe);
}

std::vector<float> tensorMaxOfRows(const lower::WeightRecipe &recipe, const WeightStore &weights) {
  using Source = lower::WeightRecipe::Source;
  const int64_t rows = recipe.shape.size() > 1 ? recipe.shape[0] : 1;
  int64_t count = 1;
  for (int64_t d : recipe.shape) count *= d;
  const int64_t rowSize = count / rows;
  std::vector<float> all; // one entry per row of the whole source (all its tensors)
  if (recipe.source == Source::Tensor || recipe.source == Source::Concat) {
    for (const std::string &t : recipe.tensors) {
      const auto &v = weights.get(t).values();
      all.insert(all.end(), v.size() / size_t(rowSize), codegen::maxAbs(v.data(), int64_t(v.size())));
      if (recipe.source == Source::Tensor) break;
    }
  } else {
    const std::vector<double> whole = makeWhole(recipe, weights);
    const std::vector<float> made(whole.begin(), whole.end()); // as the packer sees it: rounded to f32
    all.assign(made.size() / size_t(rowSize), codegen::maxAbs(made.data(), int64_t(made.size())));
  }
  if (recipe.rowBegin + rows > int64_t(all.size()))
    throw std::logic_error("weight recipe " + recipe.name + ": rows past the end of its tensor");
  return std::vector<float>(all.begin() + recipe.rowBegin, all.begin() + recipe.rowBegin + rows);
}

namespace {
std::vector<float> makeRows(const lower::WeightRecipe &recipe, const WeightStore &weights) {
  int64_t count = 1;
  for (int64_t d : recipe.shape) count *= d;
  const size_t begin = size_t(recipe.rowBegin * (recipe.shape.empty() ? 1 : count / recipe.shape[0]));
  using Source = lower::WeightRecipe::Source;
  if (recipe.source == Source::Tensor || recipe.source == Source::Concat) {
    // Stored values as they are: their rows [begin, begin + count) of the tensor (or of
    // the tensors one after another) copied as f32, without the detour through double
    // that the computed recipes take (seconds for the GBs of an LLM; same values).
    std::vector<float> out;
    out.reserve(size_t(count));
    size_t at = 0; // where the current tensor starts in the concatenation
    const size_t end = begin + size_t(count);
    for (const std::string &t : recipe.tensors) {
      const auto &v = weights.get(t).values();
      const size_t lo = std::max(begin, at), hi = std::min(end, at + v.size());
      if (lo < hi) out.insert(out.end(), v.begin() + long(lo - at), v.begin() + long(hi - at));
      at += v.size();
      if (recipe.source == Source::Tensor) break;
    }
    if (out.size() != size_t(count))
      throw std::logic_error("weight recipe " + recipe.name + ": rows past the end of its tensor");
    return out;
  }
  const std::vector<double> whole = makeWhole(recipe, weights);
  if (begin + size_t(count) > whole.size())
    throw std::logic_error("weight recipe " + recipe.name + ": rows past the end of its tensor");
  return std::vector<float>(whole.begin() + long(begin), whole.begin() + long(begin) + count);
}

} // namespace

std::string elementOrigin(const lower::WeightRecipe &recipe, const WeightStore &weights, int64_t row, int64_t col) {
  using Source = lower::WeightRecipe::Source;
  if (recipe.transposed) std::swap(row, col);
  int64_t cols = 1; // of the constant's logical [rows, cols] (PyTorch's flattening)
  for (size_t i = 1; i < recipe.shape.size(); ++i) cols *= recipe.shape[i];
  if (recipe.kernelTaps > 1) { // columns (tap, channel) back to PyTorch's (channel, tap)
    const int64_t channels = cols / recipe.kernelTaps;
    col = col % channels * recipe.kernelTaps + col / channels;
  }
  int64_t at = (recipe.rowBegin + row) * cols + col; // in the source's values, row-major
  const auto indexIn = [&at](const std::vector<int64_t> &shape) {
    std::vector<int64_t> index(shape.size());
    for (size_t i = index.size(); i-- > 0;) {
      index[i] = shape[i] ? at % shape[i] : 0;
      at = shape[i] ? at / shape[i] : 0;
    }
    return index;
  };
  if (recipe.source == Source::NormFoldedWeight) { // the layer's weight, scaled per output channel
    const std::string layerWeight = recipe.tensors.at(0) + ".weight";
    const std::vector<int64_t> index = indexIn(weights.get(layerWeight).shape);
    return fmt::format("{}: weight [{}]{}", recipe.name, fmt::join(index, ", "), weights.fileElement(layerWeight, index));
  }
  if (recipe.source != Source::Tensor && recipe.source != Source::Concat)
    return fmt::format("{}: weight [{}, {}]", recipe.name, recipe.rowBegin + row, col);
  for (const std::string &name : recipe.tensors) {
    const Tensor &t = weights.get(name);
    const int64_t count = int64_t(t.values().size());
    if (at >= count && &name != &recipe.tensors.back()) {
      at -= count;
      continue;
    }
    const std::vector<int64_t> index = indexIn(t.shape);
    return fmt::format("{}: weight [{}]{}", name, fmt::join(index, ", "), weights.fileElement(name, index));
  }
  return fmt::format("{}: weight [{}, {}]", recipe.name, row, col);
}

} // namespace nnc::runtime
