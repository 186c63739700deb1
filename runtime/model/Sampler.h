// The next id of one batch row from its logits, as `nnc --generate` and the library's
// nnc::Decoder pick it (docs/cli.md, --generate): the argmax (temperature 0), or a draw
// from softmax(logits / T) over the topK largest (all with topK 0), narrowed to the
// nucleus of topP (< 1: the fewest most probable of those whose probabilities sum to at
// least topP, as transformers' top_p), in f64, from a generator seeded once, so the same
// seed gives the same ids; in IEEE arithmetic rounding to nearest whatever the calling
// thread's mode (runtime/FloatMode.h), so a host's rounding mode changes no draw.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace nnc::runtime {

// Before an id is picked from a batch row's logits for the `token`-th new token (from 0):
// a UserError naming the model, the row and the token when they hold a NaN (a model
// whose weights or activations are NaN, or overflowed). Sampler::next itself never
// picks a NaN's id, and all NaN would give id 0: an id made up (nnc --generate,
// nnc::Decoder::generate).
void requireLogitsWithoutNaN(const float *logits, int64_t vocab, const std::string &model, int64_t row, int64_t token);

class Sampler {
public:
  Sampler(double temperature, int64_t topK, double topP, uint64_t seed)
      : t_(temperature), topK_(topK), topP_(topP), rng_(seed) {}
  int32_t next(const float *logits, int64_t vocab);

  // What a draw (temperature > 0) picks from: the top k ids and, below topP 1, their
  // nucleus, with weights exp((logit - max) / T), not normalised. The nucleus is most
  // probable first (equal logits: the lower id first); so are all of them when `sorted`,
  // else the ids outside a nucleus are in no particular order (the same for the same
  // logits, so a seed still gives the same ids).
  struct Candidates {
    std::vector<int32_t> ids;
    std::vector<double> weights;
  };
  Candidates candidates(const float *logits, int64_t vocab, bool sorted = true) const;

private:
  double t_;
  int64_t topK_;
  double topP_;
  std::mt19937_64 rng_;
};

} // namespace nnc::runtime
