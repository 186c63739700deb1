// The compiler driver: the one path from a .nn program to a model that runs, used by
// the command line, the tests and bench/.
//
//   Compiler::fromFile / fromSource   read and parse (diagnostics → the sink)
//   analyze(options)                  expand the model, run the analysis passes (the
//                                     report's figures), then the lowering passes and
//                                     the lowering stage (the kernel program, its arena)
//   compileModel(analyzed, jit, threads)   the runtime's CompiledModel of that program
//
// Diagnostics go to the sink given at construction, once per stage that produced
// any; the driver never prints. A stage with errors throws CompileError (a UserError,
// exit code 1) after giving them to the sink.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/Ast.h"
#include "compiler/ir/Ir.h"
#include "compiler/lower/KernelProgram.h"
#include "compiler/passes/Analysis.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/FloatMode.h"

namespace nnc::runtime {
class CompiledModel;
class JitEngine;
} // namespace nnc::runtime

namespace nnc::driver {

using DiagnosticSink = std::function<void(const DiagnosticEngine &)>;
// Called with the IR after every pass (--emit ir --print-after NAME).
using IrObserver = std::function<void(const char *pass, const ir::Graph &)>;

class CompileError : public UserError {
public:
  CompileError(const std::string &message, std::vector<SourceDiagnostic> diagnostics)
      : UserError(message), diagnostics_(std::move(diagnostics)) {}
  const std::vector<SourceDiagnostic> &diagnostics() const { return diagnostics_; }

private:
  std::vector<SourceDiagnostic> diagnostics_;
};

// Limits shared by the command line and the C++ API: a thread count (a pool of 100,000
// workers exhausts the process limit) and an i4 scale group (near 2^63 the packing's
// sizes overflowed).
inline constexpr int kMaxThreads = 256;
inline constexpr int64_t kMaxQuantGroup = int64_t(1) << 20;

struct CompileOptions {
  std::string model;                    // empty: the file's only model
  std::map<std::string, int64_t> sets;  // --set NAME=V (batch included)
  std::optional<DType> dtype;           // --dtype: default storage of every layer
  lower::Quantisation quant;            // --quant, --quant-group: i8 / i4 weights
  bool dtypeOverridesLayers = false;    // dtype wins over every layer's dtype= too
  int64_t kvContext = 0;                // > 0: a decoder's program with a KV cache (lower/Lower.h)
  DType kvType = DType::F32;            // --kv-dtype: the cache's f32, f16, bf16 or i8 (the report counts it too)
  bool argmax = false;                  // a decoder's program for greedy decoding (lower/Lower.h: argmax)
  std::optional<int64_t> inputLength;   // a decoder's program: the input's length (ExpandOptions::inputLength)
  bool holdWarnings = false;            // warnings wait in AnalyzedModel::heldWarnings (errors still go to the sink)
};

// One model at one set of parameters, analysed and lowered.
struct AnalyzedModel {
  ir::Graph graph;                  // as written (the report describes this)
  passes::ModelAnalysis analysis;   // its figures
  ir::Graph lowered;                // after the lowering passes (folds, fused epilogues)
  lower::KernelProgram program;     // what the runtime executes; its arena is the runtime memory
  std::vector<DiagnosticEngine> heldWarnings; // CompileOptions::holdWarnings: for Compiler::showWarnings
};

class Compiler {
public:
  // Reads (at most 16 MiB) and parses; throws UserError when the file cannot be read,
  // CompileError on syntax errors.
  static Compiler fromFile(const std::string &path, DiagnosticSink sink = {});
  static Compiler fromSource(std::string name, std::string text, DiagnosticSink sink = {});
  Compiler(Compiler &&) noexcept;
  ~Compiler();

  AnalyzedModel analyze(const CompileOptions &options, const IrObserver &after = {}) const;
  // Hands the warnings `m` held (CompileOptions::holdWarnings) to the sink, once: a
  // caller that may analyse again (a run whose .npy sets the batch) shows only the
  // warnings of the model it runs.
  void showWarnings(AnalyzedModel &m) const;
  const SourceFile &source() const;

private:
  struct State;
  explicit Compiler(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// Every pass name, in pipeline order (analysis, then lowering).
std::vector<std::string> passNames();

// Decoding (runtime/model/Decoder.h) needs a language model: token ids i32[seq] in,
// logits [seq, vocab] out (a decoder's program: [1, vocab], the last position's, when
// the lowering keeps only it: lower/Lower.h). requireLanguageModel throws a UserError naming `who` (the
// caller: "--generate", "DecoderModel") and both types otherwise.
bool isLanguageModel(const lower::KernelProgram &p);
void requireLanguageModel(const AnalyzedModel &m, const std::string &who);
// Generating feeds each new id back in: requireIdsFedBack throws a UserError when an
// embedding takes fewer ids than the logits can pick.
void requireIdsFedBack(const AnalyzedModel &m, const std::string &who);
// What a context of `needed` positions would take, for a "context too short" message:
// a larger pos_embedding table when one holds fewer positions (no setting helps then),
// else the parameter(s) that set the input's length, each as `setting(name, value)`
// writes it (the CLI's --set, the API's Options::set), or that the length is a number.
std::string longerContextHint(const ir::Graph &g, int64_t needed,
                              const std::function<std::string(const std::string &, const std::string &)> &setting);

// The decoder's program at `seq` positions, lowered for a KV cache of the context,
// the input length of `whole` (the model as written): `base` with the input that long
// and every parameter as in `whole`, so a table sized by the parameter seq keeps the
// context's size; the programs share one set of weights.
AnalyzedModel analyzeDecoderProgram(const Compiler &file, CompileOptions base, int64_t seq, const AnalyzedModel &whole);

// The model's kernels compiled on `jit` (which must outlive the model); throws
// UserError when a layer cannot run yet.
std::unique_ptr<runtime::CompiledModel> compileModel(const AnalyzedModel &m, runtime::JitEngine &jit, int threads,
                                                     runtime::Denormals denormals = runtime::Denormals::Flush);

} // namespace nnc::driver
