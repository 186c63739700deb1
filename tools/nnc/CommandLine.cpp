#include "CommandLine.h"

#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "compiler/driver/Driver.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/model/WeightCache.h"

namespace nnc::cli {

std::string usageText() {
  return R"(usage: nnc FILE.nn [--report] [--format text|json|md] [--explain] [--expand]
                   [--sweep NAME=V1,V2,...] [--svg FILE]
       nnc FILE.nn --check
       nnc FILE.nn --run INPUT WEIGHTS [--output FILE] [RUNNING]
       nnc FILE.nn --bench WEIGHTS [--runs N] [--profile] [--format json] [RUNNING]
       nnc FILE.nn --generate N --prompt FILE.npy WEIGHTS [--temperature T [--top-k K]
                   [--top-p P] [--seed S]] [--stop ID]... [--output FILE] [--profile]
                   [--format json] [RUNNING]
       nnc FILE.nn --compare-dtypes WEIGHTS [--input FILE] [--runs N] [--format json] [RUNNING]
       nnc FILE.nn --emit ir [--print-after PASS] | --emit plan|llvm|asm
WEIGHTS is --weights FILE.safetensors [--weight-map FILE] or --random-weights SEED,
RUNNING is [--threads N] [--max-memory BYTES] [--denormals flush|keep]; every form takes
the model options below. Every flag in full: docs/cli.md.

Model selection
  --model NAME          choose a model in a file with several
  --set NAME=VALUE      override a model parameter (repeatable)
  --batch N             the batch size (same as --set batch=N)
  --dtype f32|f16|bf16|i8|i4   default storage dtype of weights (a layer's dtype= wins)
  --quant per-channel|per-tensor   i8 scales: one per output channel (default) or one per
                        tensor
  --quant-group N       i4: one scale per N weights along K (default 32)
  --activations f32|bf16|i8   the GEMMs whose weights are bf16 (i8) multiply bf16 activations
                        (int8 ones, quantised per row) with vdpbf16ps (vpdpbusd); the
                        default dtype becomes that one. bf16 needs AVX512_BF16; i8
                        AVX512_VNNI, AVX-VNNI or AVX2 (vpmaddubsw pairs)
  --weights-in-place    f32 weights of dense layers, attention and MLPs are read where
                        they lie (the mapped weights file), not packed: nothing is copied
  --kv-dtype f32|f16|bf16|i8   how --generate's KV cache stores keys and values
                        (default f32; i8: a scale per head vector); --report counts it
  --denormals flush|keep   subnormal f32 values in a run: flushed to zero (default) or
                        kept (IEEE, as PyTorch; each one then costs a microcode assist)

Actions (default: --report)
  --check               parse and check shapes only
  --report              parameters, MACs, memory, traffic, devices
      --format text|json|md   --explain   --sweep NAME=V1,V2,...   --svg FILE
      --expand              list every layer (repeated blocks are otherwise shown once)
  --run INPUT           run the model on INPUT (.npy, or raw little-endian data)
      --weights FILE.safetensors | --random-weights SEED
      --weight-map FILE   rename the tensors of --weights first ('FROM -> TO' per line)
      --output FILE, -o FILE   write the output (.npy, or raw f32)   --threads N
      --max-memory BYTES  refuse to run a model needing more (bytes, or K, M, G, T:
                        binary multiples; default: the memory this machine has available)
  --generate N          continue --prompt FILE.npy (token ids) by N tokens, over a KV
                        cache of the model's seq positions (--set seq=N)
      --weights ... --output FILE.npy (the new ids)   --threads N
      --temperature T (0: greedy) --top-k K --top-p P --seed S   sample reproducibly
      --stop ID             end a row at this id (repeatable; e.g. the end-of-sequence id)
      --profile             also the time per layer kind and kernel, prefill and decode
  --bench               time the compiled model (--format json, --runs N)
      --profile             also the time per layer kind and kernel family
  --compare-dtypes      run the model with its weights in every dtype: weight bytes,
                        time per batch, error against f32 (--input FILE, --runs N,
                        --format json; weights as for --run)
  --emit ir|plan|llvm|asm  print the IR (--print-after PASS), the kernel program
                        (steps, buffers, weight recipes), LLVM IR or assembly
  --diagnostics-format text|json   json: one JSON object per line on stderr, nothing else there
  --no-color            no colour in diagnostics (also: NO_COLOR set)
  --help, -h, --version

Exit codes: 0 success, 1 a problem in the program or files, 2 bad usage, 3 internal error.
)";
}

std::optional<int64_t> parseInteger(const std::string &s, bool *tooLarge) {
  if (tooLarge) *tooLarge = false;
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == s.size()) return std::nullopt;
  uint64_t v = 0;
  bool lastDigit = false, overflow = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_' && lastDigit) { lastDigit = false; continue; }
    if (c < '0' || c > '9') return std::nullopt;
    overflow = overflow || __builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, uint64_t(c - '0'), &v);
    lastDigit = true;
  }
  if (!lastDigit) return std::nullopt; // "1_" or "1__0": not an integer
  if (overflow || v > uint64_t(INT64_MAX)) {
    if (tooLarge) *tooLarge = true; // well written, but beyond 64 bits
    return std::nullopt;
  }
  return neg ? -int64_t(v) : int64_t(v);
}

namespace {
class ArgReader {
public:
  // Accepts --flag=value as well as --flag value (--set and --sweep values hold '=').
  ArgReader(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      const auto eq = a.find('=');
      if ((a.rfind("--", 0) == 0 || a.rfind("-o=", 0) == 0) && eq != std::string::npos) {
        args_.push_back(a.substr(0, eq));
        args_.push_back(a.substr(eq + 1));
        inlineValues_.insert(args_.size() - 1);
      } else {
        args_.push_back(a);
      }
    }
  }
  // A flag that takes no value, given one (`--check=yes`): else the value would be read
  // as the next argument, the model file.
  void refuseValue(const std::string &flag) const {
    if (inlineValues_.count(i_))
      throw UsageError(fmt::format("{} takes no value, found '{}={}'", flag, flag, clipped(args_[i_], 40)));
  }
  bool done() const { return i_ >= args_.size(); }
  std::string next() { return args_[i_++]; }
  std::string value(const std::string &flag) {
    if (done()) throw UsageError(fmt::format("{} needs a value", flag));
    std::string v = next();
    // `--output=` or `--weight-map ""` was silently no file and no map
    if (v.empty()) throw UsageError(fmt::format("{} needs a value, found an empty one", flag));
    return v;
  }
  int64_t integer(const std::string &flag, int64_t min, int64_t max = INT64_MAX) {
    std::string v = value(flag);
    bool tooLarge = false;
    auto n = parseInteger(v, &tooLarge);
    if (tooLarge) // digits beyond 64 bits
      throw UsageError(fmt::format("{} must be {} {}, found '{}'", flag, v[0] == '-' ? "at least" : "at most",
                                   v[0] == '-' ? min : max, clipped(v, 40)));
    if (!n) throw UsageError(fmt::format("{} expects an integer, found '{}'", flag, clipped(v, 40)));
    if (*n < min) throw UsageError(fmt::format("{} must be at least {}, found {}", flag, min, *n));
    if (*n > max) throw UsageError(fmt::format("{} must be at most {}, found {}", flag, max, *n));
    return *n;
  }

  // A seed: any unsigned 64-bit integer (digits, optional '_' separators), as the API's.
  uint64_t seed(const std::string &flag) {
    const std::string v = value(flag);
    uint64_t n = 0;
    bool digit = false, ok = !v.empty();
    for (char c : v) {
      if (c == '_' && digit) {
        digit = false;
        continue;
      }
      if (c < '0' || c > '9' || __builtin_mul_overflow(n, 10u, &n) || __builtin_add_overflow(n, uint64_t(c - '0'), &n))
        ok = false;
      digit = true;
      if (!ok) break;
    }
    if (!ok || !digit)
      throw UsageError(fmt::format("{} expects an integer from 0 to 18446744073709551615 (2^64 - 1), found '{}'", flag,
                                   v.substr(0, 40)));
    return n;
  }

private:
  std::vector<std::string> args_;
  std::set<size_t> inlineValues_; // indices in args_ of the values given after '='
  size_t i_ = 0;
};

std::string actionFlag(Action a) {
  switch (a) {
  case Action::Check: return "--check";
  case Action::Report: return "--report";
  case Action::Run: return "--run";
  case Action::Bench: return "--bench";
  case Action::Generate: return "--generate";
  case Action::CompareDTypes: return "--compare-dtypes";
  case Action::Emit: return "--emit";
  case Action::Help: return "--help";
  case Action::Version: return "--version";
  }
  return "";
}

void setAction(Options &o, Action a, bool &chosen, const std::string &flag) {
  if (chosen && o.action != a)
    throw UsageError(fmt::format("{} cannot be combined with another action (--check, --report, --run, --bench, "
                                 "--generate, --compare-dtypes, --emit)",
                                 flag));
  o.action = a;
  chosen = true;
}

// A decimal number in [lo, hi] (lo itself only when loIncluded): strtod also reads hex
// ("0x10") and "inf", which --generate's sampling options refuse.
double decimal(const std::string &flag, const std::string &v, double lo, double hi, bool loIncluded) {
  char *end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  const bool digits = v.find_first_not_of("0123456789.eE+-") == std::string::npos;
  if (v.empty() || !digits || *end != '\0' || !std::isfinite(x) || x < lo || (x == lo && !loIncluded) || x > hi)
    throw UsageError(fmt::format("{} expects a number in {}{}, {}], found '{}'", flag, loIncluded ? "[" : "(", lo, hi,
                                 v.substr(0, 40)));
  // A number too small for a double reads as 0, which would quietly mean something
  // else (--temperature 0 is greedy): nonzero digits before the exponent that read as 0.
  const std::string mantissa = v.substr(0, v.find_first_of("eE"));
  if (x == 0 && mantissa.find_first_of("123456789") != std::string::npos)
    throw UsageError(fmt::format("{} {} is below the smallest double (about 4.9e-324) and would read as 0; give 0 for "
                                 "that, or a larger number",
                                 flag, v.substr(0, 40)));
  return x;
}
// The options as a whole: what each action needs, and what it would silently not read
// or what two options would silently overrule (docs/cli.md, "Actions"). UsageError.
void checkOptionsTogether(const Options &o, bool actionChosen) {
  if (o.file.empty()) throw UsageError("expected FILE.nn (see nnc --help)");
  // The actions that compile and run the model (and read weights, --threads).
  const std::vector<Action> running = {Action::Run, Action::Bench, Action::Generate, Action::CompareDTypes};
  const bool runs = std::find(running.begin(), running.end(), o.action) != running.end();
  if (runs && o.weights.empty() && !o.randomSeed)
    throw UsageError(fmt::format("{} needs weights: give --weights FILE.safetensors or --random-weights SEED",
                                 actionFlag(o.action)));
  if (!o.compareInput.empty() && o.action != Action::CompareDTypes)
    throw UsageError("--input goes with --compare-dtypes (--run takes its input as its value)");
  if (o.action == Action::Generate && o.prompt.empty()) throw UsageError("--generate needs --prompt FILE.npy (token ids)");
  if (o.action != Action::Generate &&
      (o.gave("--prompt") || o.gave("--temperature") || o.gave("--top-k") || o.gave("--top-p") || o.gave("--seed") ||
       !o.stopIds.empty()))
    throw UsageError("--prompt, --temperature, --top-k, --top-p, --seed and --stop go with --generate");
  if (o.gave("--kv-dtype") && o.action != Action::Generate && o.action != Action::Report)
    throw UsageError("--kv-dtype goes with --generate or --report (only a decoder keeps a KV cache; the report counts "
                     "it)");
  if (o.explain && o.format == Format::Json)
    throw UsageError("--explain writes text; it cannot go with --format json (whose output must stay JSON)");
  if (!o.weights.empty() && o.randomSeed)
    throw UsageError("give either --weights or --random-weights, not both");
  if (!o.weightMap.empty() && o.weights.empty())
    throw UsageError(fmt::format("--weight-map renames the tensors of a weights file: it needs --weights FILE.safetensors{}",
                                 o.randomSeed ? " (random weights are drawn by the model's own names)" : ""));
  if (!o.sweepName.empty() && o.action != Action::Report)
    throw UsageError("--sweep goes with --report");
  if (!o.sweepName.empty() && (o.explain || !o.svg.empty()))
    throw UsageError(fmt::format("{} describes one model; --sweep prints a table of several (drop one of them)",
                                 o.explain ? "--explain" : "--svg"));
  if (o.profile && o.action != Action::Bench && o.action != Action::Generate)
    throw UsageError("--profile goes with --bench or --generate");
  if (o.format == Format::Markdown && o.action != Action::Report)
    throw UsageError("--format md goes with --report (the other actions print text or, with --format json, JSON)");
  if (o.format == Format::Json && (o.action == Action::Check || o.action == Action::Run || o.action == Action::Emit))
    throw UsageError(fmt::format("--format json goes with --report, --bench, --generate and --compare-dtypes; {}",
                                 o.action == Action::Check ? "--check prints one line (its errors as JSON: "
                                                             "--diagnostics-format json)"
                                 : o.action == Action::Run ? "--run writes its output with --output FILE (.npy or raw f32)"
                                                           : "--emit prints the IR, plan, LLVM IR or assembly as text"));
  // Options that only some actions read: with another they would be silently unused.
  struct Scope {
    const char *flag;
    bool given;
    std::vector<Action> actions;
  };
  const Scope scopes[] = {
      {"--output", !o.output.empty(), {Action::Run, Action::Generate}},
      {"--threads", o.threads != 0, running},
      {"--runs", o.benchRuns != 0, {Action::Bench, Action::CompareDTypes}},
      {"--max-memory", o.maxMemory.has_value(), {Action::Run, Action::Bench, Action::Generate, Action::CompareDTypes}},
      {"--weights", !o.weights.empty(), running},
      {"--random-weights", o.randomSeed.has_value(), running},
      {"--denormals", o.denormals.has_value(), running},
      {"--weights-in-place", o.weightsInPlace,
       {Action::Run, Action::Bench, Action::Generate, Action::CompareDTypes, Action::Emit}},
      // the report counts i8 and i4 as bare bits (docs/figures.md, "Weight bytes")
      {"--quant", o.quantPerTensor.has_value(),
       {Action::Run, Action::Bench, Action::Generate, Action::CompareDTypes, Action::Emit}},
      {"--quant-group", o.quantGroup.has_value(),
       {Action::Run, Action::Bench, Action::Generate, Action::CompareDTypes, Action::Emit}},
      {"--explain", o.explain, {Action::Report}},
      {"--expand", o.expand, {Action::Report}},
      {"--svg", !o.svg.empty(), {Action::Report}},
  };
  for (const Scope &scope : scopes) {
    if (!scope.given || std::find(scope.actions.begin(), scope.actions.end(), o.action) != scope.actions.end())
      continue;
    std::string with;
    for (size_t i = 0; i < scope.actions.size(); ++i)
      with += (i == 0 ? "" : i + 1 == scope.actions.size() ? " or " : ", ") + actionFlag(scope.actions[i]);
    throw UsageError(fmt::format("{} goes with {}; it does nothing with {}", scope.flag, with,
                                 actionChosen ? actionFlag(o.action) : "--report (the default action)"));
  }
  if (o.action == Action::Emit && o.emit == "ir")
    for (const auto &[flag, given] : {std::pair{"--quant", o.quantPerTensor.has_value()},
                                      {"--quant-group", o.quantGroup.has_value()},
                                      {"--weights-in-place", o.weightsInPlace}})
      if (given)
        throw UsageError(fmt::format("{} shapes the kernels (--emit plan, llvm or asm); --emit ir prints the IR "
                                     "before them",
                                     flag));
  if (!o.printAfter.empty() && (o.action != Action::Emit || o.emit != "ir"))
    throw UsageError("--print-after goes with --emit ir (the IR after that pass)");
  if (o.expand && !o.sweepName.empty())
    throw UsageError("--expand lists one model's layers; --sweep prints a table of several (drop one of them)");
  if (!o.sweepName.empty() && o.sets.count(o.sweepName))
    throw UsageError(fmt::format("--sweep {0}= and --set {0}= both set {0} (drop one of them)", o.sweepName));
  if (o.action == Action::Generate && o.temperature <= 0 && (o.gave("--top-k") || o.gave("--top-p") || o.gave("--seed")))
    throw UsageError("--top-k, --top-p and --seed shape sampling, which --temperature T > 0 turns on; without it "
                     "--generate is greedy (the most likely id each step)");
  if (o.action == Action::CompareDTypes && (o.dtype || o.activations != DType::F32))
    throw UsageError(fmt::format("--compare-dtypes runs the model in every storage dtype and activation mode itself; "
                                 "{} would choose one (drop it)",
                                 o.dtype ? "--dtype" : "--activations"));
  if (o.activations != DType::F32 && o.dtype && !activationsMultiply(o.activations, *o.dtype))
    throw UsageError(fmt::format("--activations {0} multiplies {0}{2} weights: --dtype {1} stores {1} (leave --dtype out, "
                                 "or give --dtype {0})",
                                 dtypeName(o.activations), dtypeName(*o.dtype),
                                 o.activations == DType::I8 ? " or i4" : ""));
}
} // namespace

Options parseCommandLine(int argc, char **argv) {
  Options o;
  ArgReader r(argc, argv);
  bool actionChosen = false;
  o.color = isatty(2) && !std::getenv("NO_COLOR");
  // A value given twice, one silently winning, is a contradiction: flags that take one
  // value (not --set, --stop: repeatable) and each --set NAME (--batch is --set batch).
  std::set<std::string> once;
  const std::set<std::string> repeatable = {"--set", "--stop", "--no-color"};
  const std::set<std::string> noValue = {"--help",    "-h",       "--version",          "--check",
                                         "--report",  "--bench",  "--compare-dtypes",   "--weights-in-place",
                                         "--explain", "--expand", "--profile",          "--no-color"};
  auto setParameter = [&](const std::string &name, int64_t value, const std::string &flag) {
    if (auto [it, fresh] = o.sets.emplace(name, value); !fresh && it->second != value)
      throw UsageError(fmt::format("{} sets {} to {}, but it was already set to {}{}", flag, name, value, it->second,
                                   name == "batch" ? " (--batch N is --set batch=N)" : ""));
  };
  while (!r.done()) {
    std::string a = r.next();
    if (a == "-o") a = "--output";
    if (a.rfind("--", 0) == 0 && !repeatable.count(a) && !once.insert(a).second)
      throw UsageError(fmt::format("{} is given twice{}", a, noValue.count(a) ? "" : " (it takes one value)"));
    if (noValue.count(a)) r.refuseValue(a);
    if (a == "--help" || a == "-h") setAction(o, Action::Help, actionChosen, a);
    else if (a == "--version") setAction(o, Action::Version, actionChosen, a);
    else if (a == "--diagnostics-format") {
      const std::string v = r.value(a);
      if (v != "text" && v != "json")
        throw UsageError(fmt::format("--diagnostics-format expects text or json, found '{}'", v));
      o.diagnosticsJson = v == "json";
    }
    else if (a == "--check") setAction(o, Action::Check, actionChosen, a);
    else if (a == "--report") setAction(o, Action::Report, actionChosen, a);
    else if (a == "--bench") setAction(o, Action::Bench, actionChosen, a);
    else if (a == "--compare-dtypes") setAction(o, Action::CompareDTypes, actionChosen, a);
    else if (a == "--input") o.compareInput = r.value(a);
    else if (a == "--quant") {
      const std::string v = r.value(a);
      if (v != "per-channel" && v != "per-tensor")
        throw UsageError(fmt::format("--quant expects per-channel or per-tensor, found '{}'", v));
      o.quantPerTensor = v == "per-tensor";
    } else if (a == "--quant-group") o.quantGroup = r.integer(a, 1, driver::kMaxQuantGroup);
    else if (a == "--weights-in-place") o.weightsInPlace = true;
    else if (a == "--denormals") {
      const std::string v = r.value(a);
      if (v != "flush" && v != "keep") throw UsageError(fmt::format("--denormals expects flush or keep, found '{}'", v));
      o.denormals = v == "keep" ? runtime::Denormals::Keep : runtime::Denormals::Flush;
    }
    else if (a == "--activations") {
      const std::string v = r.value(a);
      const auto t = parseDType(v);
      if (!t || (*t != DType::F32 && *t != DType::BF16 && *t != DType::I8))
        throw UsageError(fmt::format("--activations expects f32, bf16 or i8, found '{}'", v));
      o.activations = *t;
    }
    else if (a == "--run") { setAction(o, Action::Run, actionChosen, a); o.runInput = r.value(a); }
    else if (a == "--generate") {
      setAction(o, Action::Generate, actionChosen, a);
      o.generateTokens = r.integer(a, 1, 1'000'000);
    } else if (a == "--prompt") o.prompt = r.value(a);
    else if (a == "--temperature") o.temperature = decimal(a, r.value(a), 0, 1e6, true);
    else if (a == "--top-p") o.topP = decimal(a, r.value(a), 0, 1, false);
    else if (a == "--stop") o.stopIds.push_back(int32_t(r.integer(a, 0, INT32_MAX)));
    else if (a == "--top-k") o.topK = r.integer(a, 1);
    else if (a == "--seed") o.sampleSeed = r.seed(a);
    else if (a == "--emit") {
      setAction(o, Action::Emit, actionChosen, a);
      o.emit = r.value(a);
      if (o.emit != "ir" && o.emit != "plan" && o.emit != "llvm" && o.emit != "asm")
        throw UsageError(fmt::format("--emit expects ir, plan, llvm or asm, found '{}'", o.emit));
    } else if (a == "--print-after") o.printAfter = r.value(a);
    else if (a == "--model") o.model = r.value(a);
    else if (a == "--batch") setParameter("batch", r.integer(a, 1), a);
    else if (a == "--set") {
      std::string kv = r.value(a);
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError(fmt::format("--set expects NAME=VALUE, found '{}'", kv));
      bool tooLarge = false;
      auto v = parseInteger(kv.substr(eq + 1), &tooLarge);
      if (!v)
        throw UsageError(fmt::format("--set {}: expected an integer value{}, found '{}'", kv.substr(0, eq),
                                     tooLarge ? " from -(2^63 - 1) to 2^63 - 1" : "", clipped(kv.substr(eq + 1), 40)));
      if (kv.substr(0, eq) == "batch" && *v < 1) // as --batch (docs/cli.md: the same)
        throw UsageError(fmt::format("--set batch: expected at least 1, found {}", *v));
      setParameter(kv.substr(0, eq), *v, "--set " + kv);
    } else if (a == "--dtype") {
      std::string v = r.value(a);
      auto t = parseDType(v);
      if (!t || *t == DType::I32) throw UsageError(fmt::format("--dtype expects f32, f16, bf16, i8 or i4, found '{}'", v));
      o.dtype = t;
    } else if (a == "--kv-dtype") {
      std::string v = r.value(a);
      auto t = parseKvCacheDType(v);
      if (!t)
        throw UsageError(fmt::format("--kv-dtype expects f32, f16, bf16 or i8, found '{}'", v));
      o.kvDtype = *t;
    } else if (a == "--format") {
      std::string v = r.value(a);
      if (v == "text") o.format = Format::Text;
      else if (v == "json") o.format = Format::Json;
      else if (v == "md" || v == "markdown") o.format = Format::Markdown;
      else throw UsageError(fmt::format("--format expects text, json or md, found '{}'", v));
    } else if (a == "--explain") o.explain = true;
    else if (a == "--expand") o.expand = true;
    else if (a == "--svg") o.svg = r.value(a);
    else if (a == "--sweep") {
      std::string kv = r.value(a);
      if (!o.sweepName.empty())
        throw UsageError(fmt::format("--sweep is given once (one parameter, its values comma-separated); found a "
                                     "second: '{}'",
                                     kv));
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("--sweep expects NAME=V1,V2,..., found '{}'", kv));
      o.sweepName = kv.substr(0, eq);
      std::stringstream ss(kv.substr(eq + 1));
      std::string item;
      while (std::getline(ss, item, ',')) {
        bool tooLarge = false;
        auto v = parseInteger(item, &tooLarge);
        if (!v)
          throw UsageError(fmt::format("--sweep {}: expected integers{}, found '{}'", o.sweepName,
                                       tooLarge ? " from -(2^63 - 1) to 2^63 - 1" : "", clipped(item, 40)));
        o.sweepValues.push_back(*v);
      }
      if (o.sweepValues.empty()) throw UsageError("--sweep needs at least one value");
    } else if (a == "--weights") o.weights = r.value(a);
    else if (a == "--weight-map") o.weightMap = r.value(a);
    else if (a == "--random-weights") o.randomSeed = r.seed(a);
    else if (a == "--output") o.output = r.value(a);
    else if (a == "--max-memory") { // bytes, or K, M, G, T as NNC_WEIGHT_CACHE_MAX takes them
      const std::string v = r.value(a);
      const std::optional<int64_t> plain = parseInteger(v);
      const std::optional<uint64_t> sized = plain ? std::nullopt : runtime::WeightCache::parseSize(v);
      if (plain ? *plain < 1 : !sized || *sized < 1 || *sized > uint64_t(INT64_MAX))
        throw UsageError(fmt::format("--max-memory expects a size of 1 byte to 2^63 - 1 bytes, such as 8G, 500M "
                                     "or 1073741824 (K, M, G, T, with or without B or iB: binary multiples), found "
                                     "'{}'",
                                     clipped(v, 40)));
      o.maxMemory = plain ? *plain : int64_t(*sized);
    }
    else if (a == "--threads") o.threads = int(r.integer(a, 1, driver::kMaxThreads));
    else if (a == "--runs") o.benchRuns = int(r.integer(a, 1, 10'000'000));
    else if (a == "--profile") o.profile = true;
    else if (a == "--no-color") o.color = false;
    else if (a.rfind("-", 0) == 0 && a != "-")
      throw UsageError(fmt::format("unknown option '{}' (see nnc --help)", a));
    else if (o.file.empty()) o.file = a;
    else throw UsageError(fmt::format("expected one FILE.nn, found a second: '{}'", a));
  }
  o.given = once;
  if (o.action == Action::Help || o.action == Action::Version) return o;
  checkOptionsTogether(o, actionChosen);
  return o;
}

namespace {
// "procfs" or "sysfs" where `dir` lies on one, else null. There root passes access(W_OK)
// on every directory, and creating a file fails only after the run (ENOENT, EACCES).
const char *kernelFilesystem(const std::filesystem::path &dir) {
  struct statfs info {};
  if (::statfs(dir.c_str(), &info) != 0) return nullptr;
  if (info.f_type == PROC_SUPER_MAGIC) return "procfs";
  if (info.f_type == SYSFS_MAGIC) return "sysfs";
  return nullptr;
}
} // namespace

void checkOutputFiles(const Options &o) {
  namespace fs = std::filesystem;
  const std::pair<const char *, const std::string *> outputs[] = {{"--output", &o.output}, {"--svg", &o.svg}};
  const std::pair<const char *, const std::string *> inputs[] = {
      {"model", &o.file},     {"--weights", &o.weights}, {"--weight-map", &o.weightMap},
      {"--run", &o.runInput}, {"--prompt", &o.prompt},   {"--input", &o.compareInput}};
  for (const auto &[flag, path] : outputs) {
    if (path->empty()) continue;
    std::error_code ec;
    for (const auto &[inFlag, inPath] : inputs)
      if (!inPath->empty() && fs::equivalent(*path, *inPath, ec))
        throw UserError(fmt::format("{} {} is also the {} file: writing it would destroy that input (write to "
                                    "another file)",
                                    flag, *path, inFlag));
    if (fs::is_directory(*path, ec))
      throw UserError(fmt::format("{} {} is a directory: give the name of the file to write", flag, *path));
    const fs::path dir = fs::path(*path).has_parent_path() ? fs::path(*path).parent_path() : fs::path(".");
    if (!fs::is_directory(dir, ec))
      throw UserError(fs::exists(dir, ec)
                          ? fmt::format("{} {}: {} is not a directory", flag, *path, dir.string())
                          : fmt::format("{} {}: the directory {} does not exist", flag, *path, dir.string()));
    if (const char *kind = kernelFilesystem(dir))
      throw UserError(fmt::format("{} {}: {} is on {}, a pseudo-filesystem of the kernel's, where no output "
                                  "file can be created (write to a directory on disk)",
                                  flag, *path, dir.string(), kind));
    const bool exists = fs::exists(*path, ec);
    if (::access(exists ? path->c_str() : dir.c_str(), W_OK) != 0)
      throw UserError(fmt::format("{} {}: {} cannot be written ({})", flag, *path,
                                  exists ? "the file" : "the directory " + dir.string(), std::strerror(errno)));
  }
}

} // namespace nnc::cli
