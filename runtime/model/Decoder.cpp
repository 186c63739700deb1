#include "runtime/model/Decoder.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "compiler/support/Error.h"
#include "runtime/LargeAllocation.h"

namespace nnc::runtime {

namespace {
// Logits for every position, or for the last one only (lower/Lower.h).
bool tokensToLogits(const lower::KernelProgram &p) {
  return p.inputType.dtype == DType::I32 && p.inputType.shape.size() == 2 && p.outputType.shape.size() == 3 &&
         p.outputType.shape[0] == p.inputType.shape[0] &&
         (p.outputType.shape[1] == p.inputType.shape[1] || p.outputType.shape[1] == 1);
}
} // namespace

Decoder::Decoder(const CompiledModel &prefill) : prefill_(prefill) {
  const lower::KernelProgram &p = prefill.program();
  if (!tokensToLogits(p) || p.kvContext < 1)
    throw std::invalid_argument("Decoder: needs a decoder program (token ids to logits, lowered for a context)");
  greedy_ = p.argmax >= 0;
  batch_ = p.batch;
  vocab_ = p.outputType.shape[2];
  context_ = p.kvContext;
  promptLength_ = p.inputType.shape[1];
  prefillSpace_ = prefill.newWorkspace();
  kvCacheBytes_ = p.stateFloats * int64_t(sizeof(float));
  const size_t bytes = size_t(std::max<int64_t>(p.stateFloats, 16)) * sizeof(float);
  state_.reset(static_cast<float *>(allocateLargeZeroed(bytes, 64)));
  if (!state_)
    throw UserError(fmt::format("model '{}': its KV cache of {} positions needs {} bytes and this machine could not "
                                "allocate them",
                                p.model, context_, bytes),
                    UserError::Topic::ActivationMemory);
  prefillLogits_.resize(size_t(prefill.outputType().elements()));
  logits_.resize(size_t(batch_ * vocab_));
  nextIds_.resize(size_t(batch_));
}

void Decoder::setStep(const CompiledModel &step) {
  if (step_) throw std::logic_error("Decoder::setStep: the decoder has its step program already");
  const lower::KernelProgram &p = prefill_.program(), &s = step.program();
  if (!tokensToLogits(s) || s.inputType.shape[1] != 1 || p.batch != s.batch || p.kvContext != s.kvContext ||
      p.stateFloats != s.stateFloats || p.outputType.shape[2] != s.outputType.shape[2] ||
      (p.argmax >= 0) != (s.argmax >= 0))
    throw std::invalid_argument("Decoder: needs two decoder programs of one model (token ids to logits, the same "
                                "batch, context and state, both greedy or neither), the second at seq 1");
  stepSpace_ = step.newWorkspace();
  step_ = &step;
}

const std::vector<int32_t> &Decoder::nextIds() const {
  if (!greedy_) throw std::logic_error("Decoder::nextIds: the programs were not lowered for greedy decoding");
  return nextIds_;
}

void Decoder::need(int64_t positions) const {
  if (past_ + positions > context_)
    throw UserError(fmt::format("the context of {} positions is full: {} are in the KV cache and {} more were asked "
                                "for (the context is the model's input length)",
                                context_, past_, positions));
}

const std::vector<float> &Decoder::prefill(const int32_t *tokens) {
  past_ = 0;
  need(promptLength_);
  prefill_.run(reinterpret_cast<const float *>(tokens), prefillLogits_.data(), *prefillSpace_, prefillMicros_,
               state_.get(), 0);
  past_ = promptLength_;
  const int64_t rows = prefill_.outputType().shape[1];
  const int32_t *ids = prefill_.argmaxIds(*prefillSpace_);
  for (int64_t b = 0; b < batch_; ++b) { // the last position of each row
    std::memcpy(&logits_[size_t(b * vocab_)], &prefillLogits_[size_t((b * rows + rows - 1) * vocab_)],
                size_t(vocab_) * sizeof(float));
    if (ids) nextIds_[size_t(b)] = ids[b * rows + rows - 1];
  }
  return logits_;
}

const std::vector<float> &Decoder::decode(const int32_t *tokens) {
  if (!step_) throw std::logic_error("Decoder::decode: no step program (setStep)");
  need(1);
  step_->run(reinterpret_cast<const float *>(tokens), logits_.data(), *stepSpace_, stepMicros_, state_.get(), past_);
  past_ += 1;
  if (const int32_t *ids = step_->argmaxIds(*stepSpace_))
    std::memcpy(nextIds_.data(), ids, nextIds_.size() * sizeof(int32_t));
  return logits_;
}

} // namespace nnc::runtime
