#include "Frontend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

namespace nnc::cli {

std::string diagnosticJson(const SourceDiagnostic &d, const std::string &file) {
  const char *severity = d.severity == Severity::Error ? "error" : d.severity == Severity::Warning ? "warning" : "note";
  nlohmann::ordered_json j{{"severity", severity}, {"file", file}};
  if (d.range.begin.valid()) { // the file as a whole (two models, an unknown --set name): no position
    j["line"] = d.range.begin.line;
    j["column"] = d.range.begin.col;
  }
  j["message"] = d.message;
  if (d.range.begin.valid() && d.range.end.valid()) j["end_column"] = d.range.end.col;
  nlohmann::ordered_json notes = nlohmann::ordered_json::array();
  for (const auto &n : d.notes)
    notes.push_back(n.range.begin.valid() ? nlohmann::ordered_json{{"line", n.range.begin.line},
                                                                    {"column", n.range.begin.col},
                                                                    {"message", n.message}}
                                          : nlohmann::ordered_json{{"message", n.message}});
  j["notes"] = notes;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

driver::Compiler openProgram(const Options &opts) {
  const bool color = opts.color, json = opts.diagnosticsJson;
  const std::string file = opts.file;
  // An action that analyses the model more than once (--generate's programs, --sweep's
  // values) prints a diagnostic an earlier analysis printed only once; within one
  // analysis each is printed (a block used twice makes the same error twice, counted twice).
  auto shown = std::make_shared<std::set<std::string>>();
  return driver::Compiler::fromFile(opts.file, [color, json, file, shown](const DiagnosticEngine &d) {
    std::set<std::string> now;
    for (const auto &diag : d.diagnostics()) {
      std::string text = json ? diagnosticJson(diag, file) + "\n" : d.render(diag, color);
      if (!shown->count(text)) printStderr("{}", text);
      now.insert(std::move(text));
    }
    shown->insert(now.begin(), now.end());
    if (!json && d.errorCount() > DiagnosticEngine::kMaxErrors)
      printStderr("nnc: {} more errors not shown\n", d.errorCount() - DiagnosticEngine::kMaxErrors);
    if (!json && d.warningCount() > DiagnosticEngine::kMaxErrors)
      printStderr("nnc: {} more warnings not shown\n", d.warningCount() - DiagnosticEngine::kMaxErrors);
    std::fflush(stderr);
  });
}

driver::CompileOptions compileOptions(const Options &opts, const std::map<std::string, int64_t> &sets) {
  driver::CompileOptions c;
  c.model = opts.model;
  c.sets = sets;
  c.dtype = opts.dtype;
  c.quant.perTensor = opts.quantPerTensor.value_or(c.quant.perTensor);
  c.quant.group = opts.quantGroup.value_or(c.quant.group);
  c.quant.activations = opts.activations;
  c.quant.weightsInPlace = opts.weightsInPlace;
  if (opts.activations != DType::F32 && !c.dtype) c.dtype = opts.activations; // the weights it multiplies
  c.kvType = opts.kvDtype;
  return c;
}

std::string plainDiagnosticJson(const std::string &severity, const std::string &message) {
  const nlohmann::ordered_json j{{"severity", severity}, {"message", message}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void printStatus(const Options &opts, const std::string &text) {
  if (!opts.diagnosticsJson) return printStderr("{}", text);
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) printStderr("{}\n", plainDiagnosticJson("info", text.substr(begin, end - begin)));
    begin = end + 1;
  }
}

void printWarning(const Options &opts, const std::string &message) {
  const std::string clipped = clipMessage(message);
  if (opts.diagnosticsJson) printStderr("{}\n", plainDiagnosticJson("warning", clipped));
  else printStderr("nnc: warning: {}\n", clipped);
}

runtime::KernelCacheOptions kernelCacheOptions(const Options &opts) {
  runtime::KernelCacheOptions cache = runtime::KernelCacheOptions::fromEnvironment();
  cache.onWarning = [opts](const std::string &message) {
    printWarning(opts, message + " (NNC_CACHE_DIR sets another directory, NNC_CACHE=off turns the cache off)");
  };
  return cache;
}

runtime::WeightMap readWeightMap(const Options &opts) {
  return opts.weightMap.empty() ? runtime::WeightMap() : runtime::WeightMap::fromFile(opts.weightMap);
}

runtime::WeightStore loadWeights(const Options &opts, const lower::KernelProgram &program, const std::string &model,
                                 const runtime::WeightMap &map) {
  return opts.randomSeed ? runtime::WeightStore::random(program.tensors, *opts.randomSeed)
                         : runtime::WeightStore::fromSafeTensors(program.tensors, opts.weights, model, map,
                                                                 program.tiedTensors);
}

void requireQuantisedWeights(const Options &opts, const driver::AnalyzedModel &m) {
  const auto stores = [&](DType t) {
    return std::any_of(m.graph.ops.begin(), m.graph.ops.end(), [t](const ir::Op &op) { return op.weightDType == t; });
  };
  const auto refuse = [&](const std::string &flag, DType t) {
    throw UserError(fmt::format("{} sets the scales of {} weights, and model '{}' stores none in {} (give --dtype {}, "
                                "or dtype={} on its layers; or drop {})",
                                flag, dtypeName(t), m.graph.modelName, dtypeName(t), dtypeName(t), dtypeName(t),
                                flag.substr(0, flag.find(' '))));
  };
  if (opts.quantPerTensor && !stores(DType::I8))
    refuse(*opts.quantPerTensor ? "--quant per-tensor" : "--quant per-channel", DType::I8);
  if (opts.quantGroup && !stores(DType::I4)) refuse(fmt::format("--quant-group {}", *opts.quantGroup), DType::I4);
}

} // namespace nnc::cli
