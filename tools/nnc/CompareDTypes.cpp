// --compare-dtypes: the model run on one input with its weights stored in each dtype
// (f32, f16, bf16, i8, i4 — every layer, dtype= included), and per dtype: the bytes of
// the constants as the kernels read them, the time per batch (best of N runs, and the
// median) and the output's error against the f32 run. The errors are relative to the
// f32 output's magnitude (docs/cli.md): max |y − y32| / max |y32| and
// mean |y − y32| / mean |y32| (element-wise ratios blow up on outputs near zero).
// A dtype the model cannot run in is a row that says why; the others still run. Then
// the low-precision activation modes the host's kernel row has (bf16 with bf16 weights,
// i8 with i8 and with i4 weights: --activations), as rows of their own.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "Actions.h"
#include "Frontend.h"
#include "RunInput.h"
#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/support/Diagnostics.h"
#include "runtime/model/CompiledModel.h"

namespace nnc::cli {

namespace {
struct Row {
  DType dtype;
  DType activations = DType::F32;
  std::string error; // why this dtype cannot run; empty when it ran
  int64_t weightBytes = 0;
  double bestMillis = 0, medianMillis = 0;
  double maxRelError = 0, meanRelError = 0;
};

// The analysed model with every layer's weights in `dtype`, the GEMMs' activations in
// `activations`.
driver::AnalyzedModel analyzeIn(const driver::Compiler &file, const Options &opts,
                                const std::map<std::string, int64_t> &sets, DType dtype,
                                DType activations = DType::F32, bool holdWarnings = false) {
  driver::CompileOptions c = compileOptions(opts, sets);
  c.holdWarnings = holdWarnings;
  c.dtype = dtype;
  c.dtypeOverridesLayers = true;
  c.quant.activations = activations;
  return file.analyze(c);
}

// max and mean |y − ref| relative to max and mean |ref|.
std::pair<double, double> relativeErrors(const std::vector<float> &y, const std::vector<float> &ref) {
  double maxDiff = 0, maxRef = 0, sumDiff = 0, sumRef = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = std::fabs(double(y[i]) - double(ref[i])), r = std::fabs(double(ref[i]));
    maxDiff = std::max(maxDiff, d), maxRef = std::max(maxRef, r);
    sumDiff += d, sumRef += r;
  }
  return {maxRef > 0 ? maxDiff / maxRef : maxDiff, sumRef > 0 ? sumDiff / sumRef : sumDiff};
}

std::string percent(double v) { return fmt::format("{:.4f} %", 100 * v); }
} // namespace

int compareDTypes(const Options &opts) {
  const runtime::WeightMap weightMap = readWeightMap(opts);
  driver::Compiler file = openProgram(opts);
  auto sets = opts.sets;
  // With --input, the warnings are those of the model at the file's batch.
  driver::AnalyzedModel m = analyzeIn(file, opts, sets, DType::F32, DType::F32, !opts.compareInput.empty());
  WarningsAtExit warnings{file, m};
  auto jit = runtime::JitEngine::create(kernelCacheOptions(opts)); // its warning printed, as --run's
  // Each row's whole memory (the input and the f32 output kept to compare with counted
  // in) is checked before it is taken; the f32 row's before the input is read or drawn.
  const auto checkMemory = [&](const lower::KernelProgram &p) {
    checkRunMemory(opts, p, jit->microKernel(), 4 * (p.inputType.elements() + m.program.outputType.elements()));
  };
  std::vector<float> input;
  if (!opts.compareInput.empty()) {
    Options in = opts;
    in.runInput = opts.compareInput;
    input = readInput(in, m.graph.modelName, m.graph.ops[0].type, [&](int64_t batch, int64_t) {
              if (batch && batch != m.graph.batch) {
                sets["batch"] = batch;
                m.heldWarnings.clear(); // of a model that does not run
                m = analyzeIn(file, opts, sets, DType::F32);
              }
              file.showWarnings(m);
              checkMemory(m.program);
            }).values;
  } else {
    if (m.program.inputType.dtype != DType::F32)
      throw UserError(fmt::format("{}: model '{}' reads {} token ids; give them with --input FILE", opts.file,
                                  m.graph.modelName, dtypeName(m.program.inputType.dtype)));
    checkMemory(m.program);
    std::mt19937_64 rng(opts.randomSeed.value_or(0));
    std::normal_distribution<float> normal;
    input.resize(size_t(m.program.inputType.elements()));
    for (float &v : input) v = normal(rng);
  }
  const int threads = opts.threads ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const runtime::WeightStore weights = loadWeights(opts, m.program, m.graph.modelName, weightMap);
  const int runs = opts.benchRuns ? opts.benchRuns : 10;
  const lower::Quantisation quant = compileOptions(opts, sets).quant;

  std::vector<Row> rows;
  std::vector<float> reference;
  std::vector<std::pair<DType, DType>> modes; // (weights, activations)
  for (DType dtype : kWeightDTypes) modes.push_back({dtype, DType::F32});
  for (auto [dtype, act] : {std::pair{DType::BF16, DType::BF16}, {DType::I8, DType::I8}, {DType::I4, DType::I8}})
    if (codegen::missingDotInstructions(act, jit->features(), jit->microKernel()).empty())
      modes.push_back({dtype, act});
  for (auto [dtype, activations] : modes) {
    Row row;
    row.dtype = dtype;
    row.activations = activations;
    try {
      driver::AnalyzedModel md = analyzeIn(file, opts, sets, dtype, activations);
      checkMemory(md.program);
      auto model = driver::compileModel(md, *jit, threads, denormalsOf(opts));
      model->setWeights(weights);
      row.weightBytes = model->constantBytes();
      std::vector<float> out(size_t(model->outputType().elements()));
      model->run(input.data(), out.data()); // warm up
      std::vector<double> ms;
      for (int i = 0; i < runs; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        model->run(input.data(), out.data());
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      row.bestMillis = ms.front();
      row.medianMillis = ms[ms.size() / 2];
      if (dtype == DType::F32) reference = out;
      else if (!reference.empty()) std::tie(row.maxRelError, row.meanRelError) = relativeErrors(out, reference);
      else row.error = "no f32 run to compare with";
    } catch (const UserError &e) {
      if (dtype == DType::F32) throw; // nothing to compare against
      row.error = e.what();
    }
    rows.push_back(std::move(row));
  }

  if (opts.format == Format::Json) {
    nlohmann::ordered_json j{{"model", m.graph.modelName},  {"batch", m.graph.batch},
                             {"threads", threads},          {"runs", runs},
                             {"kernel_row", jit->microKernel().family},
                             {"quant", quant.perTensor ? "per-tensor" : "per-channel"},
                             {"quant_group", quant.group}, {"dtypes", nlohmann::ordered_json::array()}};
    for (const Row &r : rows) {
      nlohmann::ordered_json d{{"dtype", dtypeName(r.dtype)}, {"activations", dtypeName(r.activations)}};
      if (!r.error.empty()) d["error"] = r.error;
      else
        d.update({{"weight_bytes", r.weightBytes}, {"best_ms", r.bestMillis}, {"median_ms", r.medianMillis},
                  {"max_rel_error", r.maxRelError}, {"mean_rel_error", r.meanRelError}});
      j["dtypes"].push_back(d);
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model {} batch {} threads {}, kernel row {}; i8 scales {}, i4 groups of {}; best of {} runs\n",
             m.graph.modelName, m.graph.batch, threads, jit->microKernel().family,
             quant.perTensor ? "per tensor" : "per channel", quant.group, runs);
  fmt::print("{:<6} {:<11} {:>16} {:>12} {:>12} {:>14} {:>14}\n", "dtype", "activations", "weight bytes", "best ms",
             "median ms", "max rel err", "mean rel err");
  for (const Row &r : rows) {
    if (!r.error.empty()) {
      fmt::print("{:<6} {:<11} cannot run: {}\n", dtypeName(r.dtype), dtypeName(r.activations), r.error);
      continue;
    }
    fmt::print("{:<6} {:<11} {:>16} {:>12.4f} {:>12.4f} {:>14} {:>14}\n", dtypeName(r.dtype), dtypeName(r.activations),
               withCommas(r.weightBytes), r.bestMillis, r.medianMillis, percent(r.maxRelError),
               percent(r.meanRelError));
  }
  fmt::print("errors: against the f32 run, relative to the f32 output's magnitude (max |y - y32| / max |y32|, "
             "mean |y - y32| / mean |y32|)\n");
  return 0;
}

} // namespace nnc::cli
