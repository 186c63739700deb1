#include "compiler/driver/Driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "compiler/frontend/Expander.h"
#include "compiler/frontend/Parser.h"
#include "compiler/lower/Lower.h"
#include "compiler/passes/Pipeline.h"
#include "runtime/model/CompiledModel.h"

namespace nnc::driver {

namespace {
constexpr size_t kMaxSourceBytes = 16 << 20; // a .nn file is text, not data

// At most kMaxSourceBytes + 1 bytes are read: /dev/zero or a pipe that never ends is
// refused as too large instead of filling the memory. A directory opens as a stream
// that reads nothing, which read as "the file is empty".
std::string readSource(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError(fmt::format("{}: is a directory: expected a .nn file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::string text(kMaxSourceBytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (in.bad()) throw UserError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  if (text.size() > kMaxSourceBytes) {
    const auto size = std::filesystem::is_regular_file(path, ec) ? std::filesystem::file_size(path, ec) : 0;
    throw UserError(fmt::format("{}: file too large for a .nn program: expected at most {} bytes, found {}", path,
                                withCommas(kMaxSourceBytes),
                                size > kMaxSourceBytes && !ec ? withCommas(int64_t(size)) : std::string("more")));
  }
  return text;
}
} // namespace

struct Compiler::State {
  std::unique_ptr<SourceFile> source;
  DiagnosticSink sink;
  ast::Program program;

  // Hands this stage's diagnostics to the sink (or, warnings only, to `held`); throws
  // CompileError if any is an error, after the warnings held so far.
  void finish(const DiagnosticEngine &d, std::vector<DiagnosticEngine> *held = nullptr) const {
    if (held && !d.hasErrors()) {
      if (!d.diagnostics().empty()) held->push_back(d);
      return;
    }
    if (held && sink)
      for (const DiagnosticEngine &w : *held) sink(w);
    if (!d.diagnostics().empty() && sink) sink(d);
    if (d.hasErrors())
      throw CompileError(fmt::format("{}: {} error{}", source->path(), d.errorCount(), d.errorCount() == 1 ? "" : "s"),
                         d.diagnostics());
  }
};

Compiler::Compiler(std::unique_ptr<State> s) : s_(std::move(s)) {}
Compiler::Compiler(Compiler &&) noexcept = default;
Compiler::~Compiler() = default;

Compiler Compiler::fromFile(const std::string &path, DiagnosticSink sink) {
  return fromSource(path, readSource(path), std::move(sink));
}

Compiler Compiler::fromSource(std::string name, std::string text, DiagnosticSink sink) {
  // A UTF-8 byte-order mark, which Windows editors write, is not part of the program
  // (columns on line 1 count from after it, as such an editor shows them).
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  auto s = std::make_unique<State>();
  s->source = std::make_unique<SourceFile>(std::move(name), std::move(text));
  s->sink = std::move(sink);
  DiagnosticEngine d(s->source.get());
  if (s->source->text().find_first_not_of(" \t\r\n") == std::string::npos) {
    d.error({}, "the file is empty: expected at least one 'model NAME { input x: [dims] ... }'");
    s->finish(d);
  }
  auto prog = parseProgram(*s->source, d);
  s->finish(d);
  s->program = std::move(*prog);
  return Compiler(std::move(s));
}

const SourceFile &Compiler::source() const { return *s_->source; }

namespace {
// Low-precision activations apply to the GEMMs whose weights are stored in that dtype
// (lower::Quantisation): a mode that reaches none of them would silently do nothing.
void requireActivationMode(const lower::KernelProgram &p) {
  const DType mode = p.quant.activations;
  if (mode == DType::F32) return;
  for (const auto &s : p.steps)
    if (const auto *g = s.kernel ? codegen::gemmOf(*s.kernel) : nullptr;
        g && g->activationType == DType::I8 && g->weightType == DType::I4 && g->quantGroup % codegen::kDotI4GroupMultiple != 0)
      throw UserError(fmt::format("--activations i8 multiplies i4 weights in scale groups of a multiple of {} weights "
                                  "along K; layer '{}' has groups of {} (--quant-group)",
                                  codegen::kDotI4GroupMultiple, s.layer, g->quantGroup));
  for (const auto &s : p.steps)
    if (s.kernel)
      if (const auto *g = codegen::gemmOf(*s.kernel); g && g->activationType == mode) return;
  // i8 activations multiply i8 or i4 weights (lowering.md, "Low-precision activations")
  const std::string stored = mode == DType::I8 ? "i8 or i4" : std::string(dtypeName(mode));
  throw UserError(fmt::format("--activations {0} multiplies {0} activations by the {1} weights of GEMMs (dense, "
                              "conv2d, attention and mlp projections; depthwise convs, embeddings and norms keep f32 "
                              "activations), and model '{2}' has no GEMM stored in {1} (give --dtype {1}, or dtype= "
                              "on those layers)",
                              dtypeName(mode), stored, p.model));
}
} // namespace

namespace {
// An error in a model whose parameters were set from outside the file (--set, --sweep,
// Options::set) ends with a note of those values: the source the error points at shows
// only the parameter's name or default. Names no model declares have their own error.
void noteOutsideValues(DiagnosticEngine &d, const std::map<std::string, int64_t> &sets, const ast::Program &program) {
  std::vector<std::string> values;
  for (const auto &[name, value] : sets) {
    const bool declared = std::any_of(program.models.begin(), program.models.end(), [&](const ast::Callable &m) {
      return std::any_of(m.params.begin(), m.params.end(), [&](const ast::Param &p) { return p.name == name; });
    });
    if (declared && name != "batch") values.push_back(fmt::format("{}={}", name, value)); // --batch is checked where given
  }
  if (d.hasErrors() && !values.empty())
    d.note({}, fmt::format("the model's parameters set from outside the file (--set, --sweep or Options::set): {}",
                           fmt::join(values, ", ")));
}
} // namespace

AnalyzedModel Compiler::analyze(const CompileOptions &options, const IrObserver &after) const {
  std::vector<DiagnosticEngine> held;
  std::vector<DiagnosticEngine> *hold = options.holdWarnings ? &held : nullptr;
  DiagnosticEngine d(s_->source.get());
  auto graph = expandModel(
      s_->program,
      ExpandOptions{options.model, options.sets, options.dtype, options.dtypeOverridesLayers, options.inputLength}, d);
  noteOutsideValues(d, options.sets, s_->program);
  s_->finish(d, hold);
  AnalyzedModel m{std::move(*graph), {}, {}, {}, {}};
  DiagnosticEngine d2(s_->source.get());
  passes::PassContext ctx{d2, m.analysis};
  passes::runPipeline(passes::analysisPipeline(), m.graph, ctx, after);
  noteOutsideValues(d2, options.sets, s_->program);
  s_->finish(d2, hold);
  m.lowered = m.graph;
  DiagnosticEngine d3(s_->source.get());
  passes::PassContext lctx{d3, m.analysis};
  passes::runPipeline(passes::loweringPipeline(), m.lowered, lctx, after);
  noteOutsideValues(d3, options.sets, s_->program);
  s_->finish(d3, hold);
  try {
    m.program = lower::lowerGraph(m.lowered, options.quant, options.kvContext, options.kvType, options.argmax);
    requireActivationMode(m.program);
  } catch (...) { // the warnings held so far come before the error, as in finish
    if (s_->sink)
      for (const DiagnosticEngine &w : held) s_->sink(w);
    throw;
  }
  m.heldWarnings = std::move(held);
  return m;
}

void Compiler::showWarnings(AnalyzedModel &m) const {
  if (s_->sink)
    for (const DiagnosticEngine &w : m.heldWarnings) s_->sink(w);
  m.heldWarnings.clear();
}

std::vector<std::string> passNames() { return passes::passNames(); }

bool isLanguageModel(const lower::KernelProgram &p) {
  return p.inputType.dtype == DType::I32 && p.inputType.shape.size() == 2 && p.outputType.shape.size() == 3 &&
         (p.outputType.shape[1] == p.inputType.shape[1] || (p.kvContext > 0 && p.outputType.shape[1] == 1));
}

void requireLanguageModel(const AnalyzedModel &m, const std::string &who) {
  if (!isLanguageModel(m.program))
    throw UserError(fmt::format("{} needs a language model: token ids i32[seq] in, logits [seq, vocab] out; model "
                                "'{}' takes {} and gives {}",
                                who, m.graph.modelName, m.program.inputType.str(), m.program.outputType.str()));
}

void requireIdsFedBack(const AnalyzedModel &m, const std::string &who) {
  const int64_t logits = m.program.outputType.shape.back();
  for (const ir::Op &op : m.graph.ops)
    if (op.kind == ir::OpKind::Embedding && op.attrs.vocab < logits)
      throw UserError(fmt::format("{} feeds each new id back in, but model '{}' gives logits over {} ids and its "
                                  "embedding '{}' (line {}) takes ids in [0, {}): ids {} to {} could not be fed back "
                                  "(give the head the embedding's vocabulary, {})",
                                  who, m.graph.modelName, logits, op.name, op.loc.begin.line, op.attrs.vocab,
                                  op.attrs.vocab, logits - 1, op.attrs.vocab));
}

std::string longerContextHint(const ir::Graph &g, int64_t needed,
                              const std::function<std::string(const std::string &, const std::string &)> &setting) {
  for (const ir::Op &op : g.ops)
    if (op.kind == ir::OpKind::PosEmbedding && op.attrs.maxLen < needed)
      return fmt::format("its pos_embedding '{}' (line {}) holds {} positions: a longer context needs a larger table "
                         "(max_len) and weights for it",
                         op.name, op.loc.begin.line, op.attrs.maxLen);
  const std::vector<std::string> &params = g.inputLengthParameters;
  if (params.empty()) return "its input's length, a number in the model";
  if (g.inputLengthIsParameter) return fmt::format("its {}; {} makes it longer", params[0], setting(params[0], std::to_string(needed)));
  std::vector<std::string> settings;
  for (const std::string &p : params) settings.push_back(setting(p, "N"));
  return fmt::format("its input's length, written with {}; a larger {} makes it longer", fmt::join(params, " and "),
                     fmt::join(settings, " or "));
}

AnalyzedModel analyzeDecoderProgram(const Compiler &file, CompileOptions base, int64_t seq, const AnalyzedModel &whole) {
  const int64_t context = whole.program.inputType.shape[1];
  base.inputLength = seq;
  base.kvContext = context;
  AnalyzedModel m = file.analyze(base);
  if (!isLanguageModel(m.program) || m.program.inputType.shape[1] != seq)
    throw std::logic_error(fmt::format("analyzeDecoderProgram: model '{}' at {} positions takes {}",
                                       m.graph.modelName, seq, m.program.inputType.str()));
  // A layer that cannot decode (lrn or batchnorm over [seq, d], whose weights take
  // their shapes from seq) is the user's error, said before the weights are compared.
  runtime::CompiledModel::requireRunnable(m.program);
  // The programs share one set of weights: a language model's weights take their shapes
  // from its parameters and last axes, which the input's length leaves alone.
  for (const ir::ParamTensor &t : m.program.tensors)
    for (const ir::ParamTensor &w : whole.program.tensors)
      if (t.name == w.name && t.shape != w.shape)
        throw std::logic_error(fmt::format("analyzeDecoderProgram: tensor '{}' of model '{}' is [{}] at {} positions, "
                                           "[{}] at the context of {}",
                                           t.name, m.graph.modelName, fmt::join(t.shape, ", "), seq,
                                           fmt::join(w.shape, ", "), context));
  return m;
}

std::unique_ptr<runtime::CompiledModel> compileModel(const AnalyzedModel &m, runtime::JitEngine &jit, int threads,
                                                     runtime::Denormals denormals) {
  return std::make_unique<runtime::CompiledModel>(m.program, jit, threads, denormals);
}

} // namespace nnc::driver
