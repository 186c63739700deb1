// A decoder: a causal language model run incrementally over its KV cache. Two programs
// of one network, lowered for the same context (compiler/lower/Lower.h: kvContext):
// `prefill` at the prompt's length and `step` at one position; they share their
// weights (CompiledModel::setWeights with shareWith) and this object's state, the KV
// caches of every attention layer (program().stateFloats floats).
//
// prefill(tokens) runs the prompt (batch × prompt ids) from position 0 and returns the
// logits of its last position per batch row; decode(tokens) appends one id per batch
// row and returns the next logits. Positions past the context are a UserError before
// any work; reset() empties the cache. The step program may come later (setStep): a
// caller that wants its first token soonest compiles it after the prefill, and one
// that generates a single token never does. A Decoder is used by one thread at a time;
// several decoders over the same two models run on different threads at once (each
// has its own workspaces and state; the models are only read).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/model/CompiledModel.h"

namespace nnc::runtime {

class Decoder {
public:
  // A decoder program: token ids in [batch, seq], logits out in [batch, seq, vocab] (or
  // [batch, 1, vocab]), lowered for a context. Throws std::invalid_argument otherwise.
  explicit Decoder(const CompiledModel &prefill);
  Decoder(const CompiledModel &prefill, const CompiledModel &step) : Decoder(prefill) { setStep(step); }
  // The one-position program decode() runs: the same model at seq 1 (the same batch,
  // context, state and vocabulary, greedy as the prefill is). Throws
  // std::invalid_argument otherwise, std::logic_error when one is set already.
  void setStep(const CompiledModel &step);
  bool hasStep() const { return step_ != nullptr; }

  int64_t batch() const { return batch_; }
  int64_t vocab() const { return vocab_; }
  int64_t context() const { return context_; }
  int64_t promptLength() const { return promptLength_; }
  int64_t past() const { return past_; }
  // What the KV caches take: the state this decoder allocated (the programs' kvType).
  int64_t kvCacheBytes() const { return kvCacheBytes_; }
  // Both programs end with the Argmax step (greedy decoding).
  bool greedy() const { return greedy_; }

  // tokens: batch × promptLength() ids; returns batch × vocab logits (the last position's).
  const std::vector<float> &prefill(const int32_t *tokens);
  // tokens: one id per batch row; returns batch × vocab logits. Without setStep,
  // std::logic_error.
  const std::vector<float> &decode(const int32_t *tokens);
  void reset() { past_ = 0; }
  // Times every step of the runs that follow (nnc --generate --profile): each prefill
  // adds its steps' wall times to `prefillMicros`, each decode to `stepMicros`, entry s
  // for the program's step s (CompiledModel::run's stepMicros; the caller sizes them to
  // the programs' steps). Null: not timed (the default).
  void timeSteps(std::vector<double> *prefillMicros, std::vector<double> *stepMicros) {
    prefillMicros_ = prefillMicros, stepMicros_ = stepMicros;
  }
  // Greedy programs only (else std::logic_error): the next id per batch row, the first
  // maximum of the logits the last prefill or decode returned.
  const std::vector<int32_t> &nextIds() const;

private:
  void need(int64_t positions) const;

  const CompiledModel &prefill_;
  const CompiledModel *step_ = nullptr;
  std::unique_ptr<CompiledModel::Workspace> prefillSpace_, stepSpace_;
  std::unique_ptr<float, void (*)(void *)> state_{nullptr, &std::free};
  int64_t batch_, vocab_, context_, promptLength_, past_ = 0, kvCacheBytes_ = 0;
  bool greedy_ = false;
  std::vector<float> prefillLogits_, logits_;
  std::vector<int32_t> nextIds_;
  std::vector<double> *prefillMicros_ = nullptr, *stepMicros_ = nullptr;
};

} // namespace nnc::runtime
