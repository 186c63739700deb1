// The public decoder (include/nnc/nnc.h, docs/api.md): a DecoderModel is one causal
// language model lowered as decoder programs for its context (compiler/lower/Lower.h:
// kvContext), all sharing one set of constants (CompiledModel::setWeights with
// shareWith); a Decoder is one sequence over them: its KV cache (the programs' State
// buffers) and a workspace per program it has run.
//
// A prompt of any length runs as chunks whose lengths are powers of two, largest first
// (17 = 16 + 1), each a program compiled when first used and kept for every Decoder of
// the model: at most log2(context) + 1 programs, where a program per prompt length would
// compile again for every new length (docs/api.md, prompt lengths). The weights are
// kept so that a program compiled later packs the constants it cannot share.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "api/Internal.h"
#include "runtime/LargeAllocation.h"
#include "runtime/model/CompiledModel.h"
#include "runtime/model/Sampler.h"
#include "runtime/model/StopIds.h"
#include "runtime/model/WeightStore.h"

namespace nnc {

using namespace internal;

namespace {
int64_t largestPowerOfTwoUpTo(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
} // namespace

struct DecoderModel::Impl {
  std::string file;
  Options options;
  driver::Compiler compiler;
  driver::CompileOptions compileOptions;
  driver::AnalyzedModel whole; // at its context without a cache: the memory bill
  std::unique_ptr<runtime::JitEngine> jit;
  int64_t context = 0, vocab = 0, batch = 1, idVocab = 0, stateFloats = 0;
  std::string name;
  std::string longerContext; // how a longer context is made, for messages


  std::mutex mutex; // guards programs and their compilation
  std::map<int64_t, std::unique_ptr<runtime::CompiledModel>> programs; // by sequence length
  std::shared_ptr<const runtime::WeightStore> weights;
  // A Decoder's call holds it shared, setWeights exclusive (after it, the mutex): a call
  // runs on one set of weights. `generation` counts the sets, so that a Decoder whose
  // KV cache was filled under another set refuses to go on (docs/api.md).
  std::shared_mutex weightsLock;
  uint64_t generation = 0;

  explicit Impl(driver::Compiler c) : compiler(std::move(c)) {}

  static std::shared_ptr<Impl> create(driver::Compiler compiler, const Options &o) {
    auto impl = std::make_shared<Impl>(std::move(compiler));
    impl->file = impl->compiler.source().path();
    impl->options = o;
    impl->compileOptions = internal::compileOptions(o);
    impl->whole = impl->compiler.analyze(impl->compileOptions);
    const lower::KernelProgram &p = impl->whole.program;
    impl->name = impl->whole.graph.modelName;
    driver::requireLanguageModel(impl->whole, "DecoderModel");
    impl->context = p.inputType.shape[1];
    impl->longerContext = driver::longerContextHint(impl->whole.graph, impl->context + 1, [](const std::string &param, const std::string &) {
      return fmt::format("Options::set[\"{}\"]", param);
    });
    impl->batch = p.batch;
    impl->vocab = p.outputType.shape[2];
    impl->idVocab = impl->vocab;
    for (const ir::Op &op : impl->whole.graph.ops) // ids index the embedding's table
      if (op.kind == ir::OpKind::Embedding) {
        impl->idVocab = op.attrs.vocab;
        break;
      }
    impl->jit = runtime::JitEngine::create(kernelCache(o));
    // The one-position program now: a layer that cannot decode (attention with
    // causal=false) is said at once.
    std::lock_guard<std::mutex> lock(impl->mutex);
    impl->stateFloats = impl->programLocked(1).program().stateFloats;
    return impl;
  }

  // The program at `seq` positions, compiled (and given the weights) when first asked for.
  runtime::CompiledModel &programLocked(int64_t seq) {
    auto found = programs.find(seq);
    if (found != programs.end()) return *found->second;
    // Every program ends with the Argmax step (docs/api.md): generate() may be greedy
    // at any call, and the step reads the logits once while they are in cache.
    driver::CompileOptions decoding = compileOptions;
    decoding.argmax = true;
    driver::AnalyzedModel m = driver::analyzeDecoderProgram(compiler, decoding, seq, whole);
    auto compiled = driver::compileModel(m, *jit, threadsOf(options), denormalsOf(options));
    if (weights) compiled->setWeights(*weights, programs.empty() ? nullptr : programs.begin()->second.get());
    return *programs.emplace(seq, std::move(compiled)).first->second;
  }
  runtime::CompiledModel &program(int64_t seq) {
    std::lock_guard<std::mutex> lock(mutex);
    return programLocked(seq);
  }

  const std::vector<ir::ParamTensor> &tensors() { return program(1).program().tensors; }
  const std::map<std::string, std::string> &tiedTensors() { return program(1).program().tiedTensors; }
  // The model at its whole context (an upper bound on any prompt chunk's program), with
  // one Decoder's KV cache and the one-position program's arena (docs/api.md).
  void checkMemory(int64_t weightsFileBytes) {
    const lower::KernelProgram &p = whole.program;
    const lower::KernelProgram &step = program(1).program();
    checkMemoryLimit(options, p,
                     runtime::memoryBill(p, jit->microKernel(), weightsFileBytes, p.inputType.elements() * 4, &step));
  }
  void setWeights(runtime::WeightStore w) {
    std::unique_lock<std::shared_mutex> exclusive(weightsLock); // after the Decoders' calls in progress
    std::lock_guard<std::mutex> lock(mutex);
    ++generation;
    auto store = std::make_shared<const runtime::WeightStore>(std::move(w));
    const runtime::CompiledModel *first = nullptr;
    for (auto &[seq, m] : programs) {
      m->setWeights(*store, first);
      if (!first) first = m.get();
    }
    weights = std::move(store);
  }
  void loadFile(const std::string &path, const runtime::WeightMap &map) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    checkMemory(ec ? 0 : int64_t(size));
    setWeights(runtime::WeightStore::fromSafeTensors(tensors(), path, name, map, tiedTensors()));
  }
  void loadBytes(const void *bytes, size_t size, const runtime::WeightMap &map) {
    checkWeightBytes("DecoderModel", bytes, size);
    checkMemory(int64_t(size));
    const auto *p = static_cast<const uint8_t *>(bytes);
    SafeTensorsFile f = SafeTensorsFile::fromBytes("<weights in memory>", std::vector<uint8_t>(p, p + size));
    setWeights(runtime::WeightStore::fromSafeTensors(tensors(), f, name, map, tiedTensors()));
  }
};

struct Decoder::Impl {
  std::shared_ptr<DecoderModel::Impl> model;
  std::unique_ptr<float, void (*)(void *)> state{nullptr, &std::free};
  std::map<int64_t, std::unique_ptr<runtime::CompiledModel::Workspace>> spaces; // by program length
  std::vector<int32_t> chunk;
  std::vector<float> out, logits;
  std::vector<int32_t> firstMax; // per batch row: the Argmax step's id for `logits`
  int64_t past = 0;
  uint64_t generation = 0; // of the model's weights that filled the cache
  bool toldSamplingUnused = false; // Options::onWarning heard it once from this Decoder

  // Under the model's weightsLock (shared): weights there, and the ones the cache was filled with.
  void ready() {
    if (!model->weights)
      throw UserError("Decoder: the model's weights were not loaded (DecoderModel::loadWeights or randomWeights)");
    if (past == 0) generation = model->generation;
    if (generation != model->generation)
      throw UserError(fmt::format("model '{}': its weights were loaded again (loadWeights or randomWeights) after this "
                                  "Decoder's KV cache was filled: its {} positions hold the old weights' keys and "
                                  "values; reset() it and prefill again",
                                  model->name, past));
  }
  void need(int64_t positions) const {
    if (positions > model->context - past) // not past + positions: it may overflow
      throw UserError(fmt::format("model '{}': {} more positions were asked for, but the context of {} has room for {} "
                                  "({} are in the KV cache, reset() empties it; the context is {})",
                                  model->name, positions, model->context, model->context - past, past,
                                  model->longerContext));
  }
  // Every id before any work, so that a bad one leaves the cache as it was.
  void checkIds(const int32_t *ids, int64_t length) const {
    for (int64_t b = 0; b < model->batch; ++b)
      for (int64_t i = 0; i < length; ++i) {
        const int32_t id = ids[b * length + i];
        if (id < 0 || id >= model->idVocab)
          throw UserError(fmt::format("model '{}': token id {} at batch row {}, position {} is outside the vocabulary "
                                      "[0, {})",
                                      model->name, id, b, past + i, model->idVocab));
      }
  }
  // Runs `seq` positions per batch row (ids: batch × seq) into `out`.
  void run(int64_t seq, const int32_t *ids, float *into) {
    runtime::CompiledModel &m = model->program(seq);
    auto &space = spaces[seq];
    if (!space) space = m.newWorkspace();
    m.run(reinterpret_cast<const float *>(ids), into, *space, nullptr, state.get(), past);
    past += seq;
    const int32_t *next = m.argmaxIds(*space); // each row's last position (lower/Lower.h)
    const int64_t rows = m.outputType().shape[1];
    firstMax.resize(size_t(model->batch));
    for (int64_t b = 0; b < model->batch; ++b) firstMax[size_t(b)] = next[b * rows + rows - 1];
  }

  const std::vector<float> &prefill(const int32_t *tokens, int64_t length) {
    std::shared_lock<std::shared_mutex> shared(model->weightsLock);
    ready();
    if (length < 1) throw UserError("Decoder::prefill: a prompt of at least one token, found 0");
    need(length);
    checkIds(tokens, length);
    const int64_t batch = model->batch, vocab = model->vocab, start = past;
    int64_t done = 0, last = 0;
    try {
      while (done < length) {
        const int64_t seq = largestPowerOfTwoUpTo(length - done);
        chunk.resize(size_t(batch * seq));
        for (int64_t b = 0; b < batch; ++b)
          std::memcpy(&chunk[size_t(b * seq)], tokens + b * length + done, size_t(seq) * sizeof(int32_t));
        runtime::CompiledModel &m = model->program(seq);
        last = m.outputType().shape[1]; // positions with logits: seq, or 1 (lower/Lower.h)
        out.resize(size_t(m.outputType().elements()));
        run(seq, chunk.data(), out.data());
        done += seq;
      }
    } catch (...) { // a chunk that could not compile or allocate: the cache holds what it held
      past = start;
      throw;
    }
    logits.resize(size_t(batch * vocab));
    for (int64_t b = 0; b < batch; ++b) // the last position of each row
      std::memcpy(&logits[size_t(b * vocab)], &out[size_t((b * last + last - 1) * vocab)], size_t(vocab) * sizeof(float));
    return logits;
  }

  const std::vector<float> &decode(const int32_t *ids) {
    std::shared_lock<std::shared_mutex> shared(model->weightsLock);
    ready();
    need(1);
    checkIds(ids, 1);
    logits.resize(size_t(model->batch * model->vocab));
    run(1, ids, logits.data());
    return logits;
  }

  std::vector<int32_t> generate(const int32_t *prompt, int64_t length, int64_t n, const Sampling &s) {
    if (length < 1) throw UserError("Decoder::generate: a prompt of at least one token, found 0");
    if (n < 1) throw UserError(fmt::format("Decoder::generate: at least one new token, found {}", n));
    if (!std::isfinite(s.temperature) || s.temperature < 0 || s.topK < 0)
      throw UserError(fmt::format("Decoder::generate: Sampling's temperature (finite) and topK are at least 0, found "
                                  "{} and {}",
                                  s.temperature, s.topK));
    if (!(s.topP > 0 && s.topP <= 1)) // NaN too
      throw UserError(fmt::format("Decoder::generate: Sampling's topP is in (0, 1], found {}", s.topP));
    // Unused, as the CLI's --top-k without --temperature (a usage error there). A host
    // that keeps one Sampling and varies its temperature is told, once, as transformers
    // warns for top_k without do_sample.
    if (s.temperature <= 0 && (s.topK || s.topP < 1 || s.seed) && !toldSamplingUnused) {
      toldSamplingUnused = true;
      if (const auto warn = internal::hostWarnings(model->options))
        warn(fmt::format("Decoder::generate: Sampling's topK ({}), topP ({}) and seed ({}) shape sampling, which "
                         "temperature > 0 turns on; at temperature 0 generate is greedy (the first maximum of each "
                         "row's logits) and they do nothing (said once per Decoder)",
                         s.topK, s.topP, s.seed));
    }
    for (int32_t id : s.stop)
      if (id < 0 || id >= model->vocab)
        throw UserError(fmt::format("Decoder::generate: Sampling's stop id {} is outside the vocabulary [0, {})", id,
                                    model->vocab));
    const int64_t room = model->context - past; // not past + length + n: it may overflow
    if (length > room || n > room - length)
      throw UserError(fmt::format("model '{}': {} positions in the cache, a prompt of {} and {} need "
                                  "{} positions, but the context is {} ({})",
                                  model->name, past, counted(length, "token", "tokens"), counted(n, "new one", "new ones"),
                                  n <= INT64_MAX - past - length ? fmt::format("{}", past + length + n)
                                                                 : std::string("more than 2^63"),
                                  model->context, model->longerContext));
    runtime::Sampler sampler(s.temperature, s.topK, s.topP, s.seed);
    runtime::StopIds stops(s.stop, model->batch);
    const int64_t batch = model->batch, vocab = model->vocab;
    std::vector<int32_t> fresh(static_cast<size_t>(batch * n)), next(static_cast<size_t>(batch));
    const bool greedy = s.temperature <= 0; // the programs' Argmax step picked the ids (Sampler: t <= 0)
    auto pick = [&](const std::vector<float> &l, int64_t i) {
      for (int64_t b = 0; b < batch; ++b) {
        runtime::requireLogitsWithoutNaN(&l[size_t(b * vocab)], vocab, model->name, b, i);
        fresh[size_t(b * n + i)] = next[size_t(b)] =
            stops.keep(b, greedy ? firstMax[size_t(b)] : sampler.next(&l[size_t(b * vocab)], vocab));
      }
    };
    pick(prefill(prompt, length), 0);
    int64_t made = 1;
    for (; made < n && !stops.allEnded(); ++made) pick(decode(next.data()), made);
    return made == n ? fresh : runtime::StopIds::firstColumns(fresh, batch, n, made);
  }
};

DecoderModel DecoderModel::fromFile(const std::string &path, const Options &options) {
  return translated(
      [&] {
        DecoderModel m;
        m.impl_ = Impl::create(driver::Compiler::fromFile(path, programWarnings(options)), options);
        return m;
      },
      path);
}

DecoderModel DecoderModel::fromSource(const std::string &text, const Options &options) {
  return translated(
      [&] {
        DecoderModel m;
        m.impl_ = Impl::create(driver::Compiler::fromSource("<source>", text, programWarnings(options)), options);
        return m;
      },
      "<source>");
}

void DecoderModel::loadWeights(const std::string &path) {
  translated([&] { live(impl_, "DecoderModel")->loadFile(path, {}); });
}
void DecoderModel::loadWeights(const void *bytes, size_t size) {
  translated([&] { live(impl_, "DecoderModel")->loadBytes(bytes, size, {}); });
}
void DecoderModel::loadWeights(const std::string &path, const WeightMap &map) {
  translated([&] { live(impl_, "DecoderModel")->loadFile(path, map.impl_->map); });
}
void DecoderModel::loadWeights(const void *bytes, size_t size, const WeightMap &map) {
  translated([&] { live(impl_, "DecoderModel")->loadBytes(bytes, size, map.impl_->map); });
}
void DecoderModel::randomWeights(uint64_t seed) {
  translated([&] {
    Impl &impl = *live(impl_, "DecoderModel");
    impl.checkMemory(0);
    impl.setWeights(runtime::WeightStore::random(impl.tensors(), seed));
  });
}

int64_t DecoderModel::context() const { return live(impl_, "DecoderModel")->context; }
int64_t DecoderModel::vocab() const { return live(impl_, "DecoderModel")->vocab; }
int64_t DecoderModel::batch() const { return live(impl_, "DecoderModel")->batch; }

Decoder DecoderModel::newDecoder() const {
  return translated([&] {
    auto d = std::make_unique<Decoder::Impl>();
    d->model = live(impl_, "DecoderModel");
    const size_t bytes = size_t(std::max<int64_t>(impl_->stateFloats, 16)) * sizeof(float);
    d->state.reset(static_cast<float *>(runtime::allocateLargeZeroed(bytes, 64)));
    if (!d->state)
      throw UserError(fmt::format("model '{}': its KV cache of {} positions needs {} bytes and this machine could not "
                                  "allocate them",
                                  impl_->name, impl_->context, withCommas(int64_t(bytes))));
    return Decoder(std::move(d));
  });
}

Decoder::Decoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Decoder::Decoder(Decoder &&) noexcept = default;
Decoder &Decoder::operator=(Decoder &&) noexcept = default;
Decoder::~Decoder() = default;

namespace {
// The ids a call reads: not null, and a length an int64_t holds (SIZE_MAX read as -1,
// "a prompt of 0 tokens").
int64_t checkedIds(const char *call, const int32_t *ids, size_t length) {
  if (!ids && length > 0) throw UserError(fmt::format("Decoder::{}: the token ids are a null pointer", call));
  if (length > size_t(INT64_MAX))
    throw UserError(fmt::format("Decoder::{}: a prompt of {} tokens is more than any context", call, length));
  return int64_t(length);
}
} // namespace

const std::vector<float> &Decoder::prefill(const int32_t *tokens, size_t length) {
  return translated([&]() -> const std::vector<float> & {
    return live(impl_, "Decoder")->prefill(tokens, checkedIds("prefill", tokens, length));
  });
}
const std::vector<float> &Decoder::decode(const int32_t *ids) {
  return translated([&]() -> const std::vector<float> & {
    checkedIds("decode", ids, 1);
    return live(impl_, "Decoder")->decode(ids);
  });
}
std::vector<int32_t> Decoder::generate(const int32_t *prompt, size_t length, int64_t n, const Sampling &sampling) {
  return translated([&] { return live(impl_, "Decoder")->generate(prompt, checkedIds("generate", prompt, length), n, sampling); });
}
void Decoder::reset() { live(impl_, "Decoder")->past = 0; }
const std::vector<float> &Decoder::logits() const { return live(impl_, "Decoder")->logits; }
int64_t Decoder::past() const { return live(impl_, "Decoder")->past; }
int64_t Decoder::context() const { return live(impl_, "Decoder")->model->context; }
int64_t Decoder::vocab() const { return live(impl_, "Decoder")->model->vocab; }
int64_t Decoder::batch() const { return live(impl_, "Decoder")->model->batch; }

} // namespace nnc
