#include "runtime/model/Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace nnc::runtime {

int32_t Sampler::next(const float *logits, int64_t vocab) {
  if (t_ <= 0) { // the first maximum, NaN never winning (all NaN: 0), as the Argmax kernel
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best] || (std::isnan(logits[best]) && !std::isnan(logits[i]))) best = i;
    return int32_t(best);
  }
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t k = topK_ > 0 ? std::min(topK_, vocab) : vocab;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> weights(static_cast<size_t>(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i)
    total += weights[size_t(i)] = std::exp((double(logits[ids[size_t(i)]]) - logits[ids[0]]) / t_);
  if (topP_ < 1) { // keep an id while the more probable ones hold less than topP (the first always)
    size_t keep = 1;
    for (double before = weights[0]; keep < weights.size() && before < topP_ * total; ++keep) before += weights[keep];
    weights.resize(keep);
  }
  std::discrete_distribution<int64_t> pick(weights.begin(), weights.end());
  return ids[size_t(pick(rng_))];
}

} // namespace nnc::runtime
