#include "runtime/model/Sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/FloatMode.h"

namespace nnc::runtime {

void requireLogitsWithoutNaN(const float *logits, int64_t vocab, const std::string &model, int64_t row, int64_t token) {
  const float *first = std::find_if(logits, logits + vocab, [](float x) { return std::isnan(x); });
  if (first == logits + vocab) return;
  const auto nans = std::count_if(first, logits + vocab, [](float x) { return std::isnan(x); });
  throw UserError(fmt::format("model '{}': the logits of batch row {} for new token {} hold NaN ({} of {}, the first at "
                              "id {}), so no id can be picked from them: the weights or the activations are NaN or "
                              "overflowed",
                              model, row, token, withCommas(nans), withCommas(vocab), first - logits));
}

int32_t Sampler::next(const float *logits, int64_t vocab) {
  const ScopedFloatMode ieee(Denormals::Keep); // the same draw whatever the caller's rounding (FloatMode.h)
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

// Sorted only as far as needed (a full sort of a 32000-id vocabulary per token took
// 4.0-4.3 ms, against a decode step of ~22 ms for TinyLlama in i4 at 1 thread; this takes
// 0.3 ms with every id): the top k are kept in a heap over one pass (partial_sort's
// way), and without a top k only the nucleus is sorted, in growing prefixes until it
// holds topP of the mass; a draw does not need the rest in order.
Sampler::Candidates Sampler::candidates(const float *logits, int64_t vocab, bool sorted) const {
  const ScopedFloatMode ieee(Denormals::Keep);
  auto entry = [&](int64_t i) {
    return Entry{std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i], int32_t(i), 0.0};
  };
  const size_t k = size_t(topK_ > 0 ? std::min(topK_, vocab) : vocab);
  std::vector<Entry> e;
  e.reserve(k);
  size_t done = 0; // e[0, done) is in order, most probable first
  if (k < size_t(vocab)) {
    for (int64_t i = 0; i < int64_t(k); ++i) e.push_back(entry(i));
    std::make_heap(e.begin(), e.end(), before); // the front: the least probable kept
    for (int64_t i = int64_t(k); i < vocab; ++i)
      if (const Entry x = entry(i); before(x, e.front())) {
        std::pop_heap(e.begin(), e.end(), before);
        e.back() = x;
        std::push_heap(e.begin(), e.end(), before);
      }
    std::sort_heap(e.begin(), e.end(), before);
    done = k;
  } else {
    e.resize(k);
    for (int64_t i = 0; i < vocab; ++i) e[size_t(i)] = entry(i);
  }
  const Entry &first = done ? e.front() : *std::min_element(e.begin(), e.end(), before);
  const float top = first.logit;
  double total = 0;
  for (Entry &x : e) // all logits -inf or NaN: the most probable one (the lowest id) alone
    total += x.weight = std::isinf(top) ? double(&x == &first) : std::exp((double(x.logit) - top) / t_);
  if (topP_ < 1) { // keep an id while the more probable ones hold less than topP (the first always)
    size_t i = 0, keep = 0;
    double mass = 0;
    for (bool reached = false; !reached && i < e.size();) {
      if (i == done) { // the next prefix in order: 64 ids, then four times as many as so far
        done = std::min(e.size(), std::max<size_t>(64, done * 4));
        if (done < e.size()) std::nth_element(e.begin() + long(i), e.begin() + long(done) - 1, e.end(), before);
        std::sort(e.begin() + long(i), e.begin() + long(done), before);
      }
      for (; i < done && !reached; ++i)
        if (i == 0 || mass < topP_ * total) {
          mass += e[i].weight;
          keep = i + 1;
        } else
          reached = true;
    }
    e.resize(keep);
  } else if (sorted && done < e.size())
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
