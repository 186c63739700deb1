#include "runtime/model/Sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace nnc::runtime {

int32_t Sampler::next(const float *logits, int64_t vocab) {
  if (t_ <= 0) { // the first maximum, NaN never winning (all NaN: 0), as the Argmax kernel
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best] || (std::isnan(logits[best]) && !std::isnan(logits[i]))) best = i;
    return int32_t(best);
  }
  // u in [0, Σw), then the first id whose running sum passes u: the sums are added in
  // one order both times, so one does, and an id of weight 0 never does.
  const Candidates c = candidates(logits, vocab, false);
  double total = 0;
  for (double w : c.weights) total += w;
  const double u = std::uniform_real_distribution<double>(0, total)(rng_);
  double sum = 0;
  for (size_t i = 0; i < c.ids.size(); ++i)
    if (u < (sum += c.weights[i])) return c.ids[i];
  return c.ids[0]; // only if the draw rounded up to the total
}

namespace {
struct Entry {
  float logit; // NaN read as -inf: it ranks last and weighs nothing
  int32_t id;
  double weight;
};
// Most probable first; equal logits, the lower id first (a strict order: no two ids tie).
bool before(const Entry &a, const Entry &b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }
} // namespace

// Sorted only as far as needed: the top k are selected (nth_element) and the nucleus is
// sorted in growing prefixes until it holds topP of the mass; a draw does not need the
// rest in order. A full sort of a 32000-id vocabulary per token took 8-9 ms (a decode
// step of TinyLlama in i4 takes ~22 ms at 1 thread), a partial sort of the top 40 0.12 ms.
Sampler::Candidates Sampler::candidates(const float *logits, int64_t vocab, bool sorted) const {
  std::vector<Entry> e(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    e[size_t(i)] = {std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i], int32_t(i), 0.0};
  const size_t k = size_t(topK_ > 0 ? std::min(topK_, vocab) : vocab);
  if (k < e.size()) {
    std::nth_element(e.begin(), e.begin() + long(k) - 1, e.end(), before);
    e.resize(k);
  }
  const Entry &first = *std::min_element(e.begin(), e.end(), before);
  const float top = first.logit;
  double total = 0;
  for (Entry &x : e) // all logits -inf or NaN: the most probable one (the lowest id) alone
    total += x.weight = std::isinf(top) ? double(&x == &first) : std::exp((double(x.logit) - top) / t_);
  if (topP_ < 1) { // keep an id while the more probable ones hold less than topP (the first always)
    size_t done = 0, keep = 0;
    double mass = 0;
    bool reached = false;
    while (!reached && done < e.size()) {
      const size_t m = std::min(e.size(), std::max<size_t>(64, done * 4));
      if (m < e.size()) std::nth_element(e.begin() + long(done), e.begin() + long(m) - 1, e.end(), before);
      std::sort(e.begin() + long(done), e.begin() + long(m), before);
      for (; done < m && !reached; ++done)
        if (done == 0 || mass < topP_ * total) {
          mass += e[done].weight;
          keep = done + 1;
        } else
          reached = true;
    }
    e.resize(keep);
  } else if (sorted)
    std::sort(e.begin(), e.end(), before);
  Candidates c;
  c.ids.reserve(e.size());
  c.weights.reserve(e.size());
  for (const Entry &x : e) {
    c.ids.push_back(x.id);
    c.weights.push_back(x.weight);
  }
  return c;
}

} // namespace nnc::runtime
