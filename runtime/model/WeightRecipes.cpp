#include "runtime/model/WeightRecipes.h"

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
      const auto &bv = w.get(layers[j] + ".bias").values;
      for (int64_t r = 0; r < out; ++r) bj[size_t(r)] = bv[size_t(r)];
    }
    if (j == 0) {
      W.assign(Wj.values.begin(), Wj.values.end());
      b = bj;
      rows = out;
      cols = in;
      continue;
    }
    std::vector<double> nextW(size_t(out * cols), 0.0), nextB = bj;
    for (int64_t r = 0; r < out; ++r)
      for (int64_t m = 0; m < rows; ++m) {
        const double wrm = Wj.values[size_t(r * in + m)];
        nextB[size_t(r)] += wrm * b[size_t(m)];
        for (int64_t c = 0; c < cols; ++c) nextW[size_t(r * cols + c)] += wrm * W[size_t(m * cols + c)];
      }
    W.swap(nextW);
    b.swap(nextB);
    rows = out;
  }
}
} // namespace

std::vector<float> makeConstant(const lower::WeightRecipe &recipe, const WeightStore &weights) {
  using Source = lower::WeightRecipe::Source;
  if (recipe.source == Source::Tensor) return weights.get(recipe.tensors.at(0)).values;
  std::vector<double> W, b;
  foldChain(recipe.tensors, weights, W, b);
  const std::vector<double> &v = recipe.source == Source::FoldedWeight ? W : b;
  return std::vector<float>(v.begin(), v.end());
}

} // namespace nnc::runtime
