// The command line of docs/cli.md, parsed by hand so that every
// mistake is a UsageError (exit code 2) that says what was expected.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/support/DType.h"
#include "runtime/FloatMode.h"

namespace nnc::cli {

enum class Action { Report, Check, Run, Bench, Emit, CompareDTypes, Generate, Help, Version };
enum class Format { Text, Json, Markdown };

struct Options {
  std::string file;
  std::string model;
  std::map<std::string, int64_t> sets; // --set and --batch
  std::optional<DType> dtype;
  DType kvDtype = DType::F32;  // --kv-dtype: the KV cache's dtype (--generate, the report)
  std::optional<bool> quantPerTensor; // --quant per-tensor (i8); default per-channel
  std::optional<int64_t> quantGroup;  // --quant-group N (i4); default 32 (lower::Quantisation)
  bool weightsInPlace = false; // --weights-in-place: f32 GEMM weights read from the mapped file
  DType activations = DType::F32; // --activations bf16|i8: GEMMs with weights in that dtype take it too
  std::optional<runtime::Denormals> denormals; // --denormals flush|keep (unset: flush)
  std::string compareInput;    // --input FILE for --compare-dtypes ("": normal random input)
  Action action = Action::Report;
  Format format = Format::Text;
  bool explain = false;
  std::string svg; // --svg FILE
  std::string sweepName;
  std::vector<int64_t> sweepValues;
  std::string runInput, weights, output;
  std::string weightMap; // --weight-map FILE: renames the tensors of --weights (runtime/io/WeightMap.h)
  std::optional<uint64_t> randomSeed;
  int threads = 0; // 0: all cores
  std::optional<int64_t> maxMemory; // --max-memory; none: the machine's available memory
  int benchRuns = 0; // 0: automatic
  int64_t generateTokens = 0; // --generate N
  std::string prompt;         // --prompt FILE (.npy of int32/int64 ids, [batch, length] or [length])
  double temperature = 0;     // --temperature T: 0 is greedy
  int64_t topK = 0;           // --top-k K: 0 samples from every id
  double topP = 1;            // --top-p P: below 1, only the nucleus of mass P
  std::vector<int32_t> stopIds; // --stop ID (repeatable): a row ends at the first it produces
  uint64_t sampleSeed = 0;    // --seed S
  bool profile = false; // --profile: --bench also times each step, summed per layer kind and kernel
  std::string emit; // ir | plan | llvm | asm
  std::string printAfter; // pass name for --emit ir
  bool color = false;
  bool diagnosticsJson = false; // --diagnostics-format json
  bool expand = false; // --expand: every layer of repeated blocks in the text report
  // The flags given (each at most once, but --set, --stop and the like): an option given
  // at its default value is still given, and as unused as any other value (docs/cli.md).
  std::set<std::string> given;
  bool gave(const char *flag) const { return given.count(flag) > 0; }
};

Options parseCommandLine(int argc, char **argv); // throws UsageError
// How the run treats subnormal f32 values: --denormals, flushed when not given.
inline runtime::Denormals denormalsOf(const Options &o) { return o.denormals.value_or(runtime::Denormals::Flush); }
// The files nnc writes (--output, --svg), checked before any work: one that is also an
// input would be destroyed (a mapped weights file even while it is read), and one that
// cannot be created would throw the run's result away at the end. Throws UserError.
void checkOutputFiles(const Options &o);
std::string usageText();
// Parses an integer the way the language writes it (digits, optional '_' separators,
// optional sign, each '_' between two digits); nullopt if it is not one or does not fit
// in 64 bits, and then *tooLarge says which.
std::optional<int64_t> parseInteger(const std::string &s, bool *tooLarge = nullptr);

} // namespace nnc::cli
