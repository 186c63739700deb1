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
  Candidates c = candidates(logits, vocab);
  std::discrete_distribution<int64_t> pick(c.weights.begin(), c.weights.end());
  return c.ids[size_t(pick(rng_))];
}

Sampler::Candidates Sampler::candidates(const float *logits, int64_t vocab) const {
  Candidates c;
  c.ids.resize(static_cast<size_t>(vocab));
  std::iota(c.ids.begin(), c.ids.end(), 0);
  const int64_t k = topK_ > 0 ? std::min(topK_, vocab) : vocab;
  std::partial_sort(c.ids.begin(), c.ids.begin() + k, c.ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  c.ids.resize(size_t(k));
  c.weights.resize(size_t(k));
  double total = 0;
  for (size_t i = 0; i < c.weights.size(); ++i)
    total += c.weights[i] = std::exp((double(logits[c.ids[i]]) - logits[c.ids[0]]) / t_);
  if (topP_ < 1) { // keep an id while the more probable ones hold less than topP (the first always)
    size_t keep = 1;
    for (double before = c.weights[0]; keep < c.weights.size() && before < topP_ * total; ++keep)
      before += c.weights[keep];
    c.ids.resize(keep);
    c.weights.resize(keep);
  }
  return c;
}

} // namespace nnc::runtime
