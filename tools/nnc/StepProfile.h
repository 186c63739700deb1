// Where a program's time goes, from its steps' times (CompiledModel::run's stepMicros):
// summed per layer kind and kernel family ("attention" "attn"), and per layer, largest
// first. --bench --profile times the forward program; --generate --profile the prompt's
// program and the one-position program of decoding (docs/cli.md).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/lower/KernelProgram.h"

namespace nnc::cli {

struct ProfileRow {
  std::string layerKind, kernel;
  int steps = 0;
  double micros = 0, share = 0;
};
// A layer (its steps summed), with its MACs' rate when known (0 otherwise).
struct LayerTime {
  std::string layer, kind;
  double micros = 0, gflops = 0;
};
struct StepProfile {
  std::vector<ProfileRow> kinds;  // largest first
  std::vector<LayerTime> layers;  // every timed layer, slowest first
};
constexpr size_t kSlowestLayers = 8;

// stepMicros: one time per step of `program` (per run). layerMacs: a layer's MACs by
// name (0: no rate shown), or empty.
StepProfile summarizeSteps(const lower::KernelProgram &program, const std::vector<double> &stepMicros,
                           const std::function<int64_t(const std::string &layer)> &layerMacs = {});

// The text tables (stdout or stderr by `print`): the kinds under `heading`, then the
// slowest layers (their rates when `rates`).
void printProfile(const StepProfile &profile, const std::string &heading, bool rates,
                  const std::function<void(const std::string &)> &print);

// JSON: rows {layer_kind, kernel, steps, us_per_run, share} and {layer, layer_kind,
// us_per_run[, gflops]}.
nlohmann::ordered_json kindsJson(const StepProfile &profile);
nlohmann::ordered_json layersJson(const StepProfile &profile, bool rates, size_t most = SIZE_MAX);

} // namespace nnc::cli
