// --run, --bench and --emit: the analysed model's kernel program, compiled and run.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "Actions.h"
#include "Frontend.h"
#include "RunInput.h"
#include "StepProfile.h"
#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/ir/Printer.h"
#include "compiler/lower/ProgramPrinter.h"
#include "compiler/support/Error.h"
#include "runtime/io/FileBytes.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorFiles.h"
#include "runtime/io/WeightMap.h"
#include "runtime/KernelStack.h"
#include "runtime/PeakProbe.h"
#include "runtime/model/CompiledModel.h"
#include "runtime/model/MemoryBill.h"

namespace nnc::cli {
using driver::AnalyzedModel;

namespace {

void printSummary(const ir::TensorType &t, const std::vector<float> &out) {
  fmt::print("output {}\n", t.str());
  int64_t cols = t.shape.back(), rows = int64_t(out.size()) / cols;
  std::vector<int64_t> argmax;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = out.data() + r * cols;
    // As torch.argmax: a NaN is the largest (the first one wins); max_element's `<`
    // never picks a NaN and said 0 for a row of them.
    const float *nan = std::find_if(row, row + cols, [](float v) { return std::isnan(v); });
    argmax.push_back((nan != row + cols ? nan : std::max_element(row, row + cols)) - row);
    if (r < 8) {
      std::vector<std::string> vals;
      for (int64_t c = 0; c < std::min<int64_t>(cols, 10); ++c)
        vals.push_back(std::isnan(row[c]) ? "nan" : fmt::format("{:.6g}", row[c])); // not "-nan"
      fmt::print("  [{}] {}{}\n", r, fmt::join(vals, " "), cols > 10 ? " ..." : "");
    }
  }
  if (rows > 8) fmt::print("  ... ({} rows)\n", rows);
  fmt::print("argmax per row: {}\n", fmt::join(argmax, " "));
}

// NaN and infinity propagate through the kernels as IEEE 754 says; the run says how
// many outputs are not finite (nothing when all are).
std::string nonFiniteSummary(const std::vector<float> &out) {
  int64_t nan = 0, inf = 0;
  for (float v : out) nan += std::isnan(v), inf += std::isinf(v);
  if (nan + inf == 0) return {};
  return fmt::format("non-finite outputs: {} of {} ({} NaN, {} infinite)\n", nan + inf, out.size(), nan, inf);
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double millisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// --bench --profile: each step's time, per run (the median of `runs` runs).
StepProfile profileSteps(const AnalyzedModel &m, runtime::CompiledModel &model, const std::vector<float> &x,
                         std::vector<float> &output, int runs) {
  const size_t steps = model.program().steps.size();
  std::vector<std::vector<double>> perRun;
  for (int i = 0; i < runs; ++i) {
    std::vector<double> t(steps, 0.0);
    model.run(x.data(), output.data(), &t);
    perRun.push_back(std::move(t));
  }
  std::vector<double> median(steps);
  for (size_t s = 0; s < steps; ++s) {
    std::vector<double> times;
    for (const auto &t : perRun) times.push_back(t[s]);
    median[s] = medianOf(times);
  }
  return summarizeSteps(model.program(), median, [&](const std::string &layer) -> int64_t {
    for (size_t i = 0; i < m.graph.ops.size(); ++i)
      if (m.graph.ops[i].name == layer) return m.analysis.ops[i].macs;
    return 0;
  });
}

// --bench: times run() (a warm-up, then --runs N, or ≥ 20 runs and ≥ 1 s), then
// measures the machine's peak with the same thread count (runtime/PeakProbe.h).
// compile_ms is the time to build the model's kernels in this run (compiled or
// linked from the kernel cache); jit_setup_ms the engine's creation before it.
// Weights: from the start of reading (or drawing) them to the model being ready to run;
// `read` is the WeightStore alone (the file read and converted to f32), the rest is
// CompiledModel::setWeights (recipes and packing).
struct LoadTimes {
  double total = 0, read = 0;
};

void bench(const Options &opts, const AnalyzedModel &m, runtime::CompiledModel &model, const runtime::JitEngine &jit,
           double jitSetupMillis, LoadTimes load) {
  // Token ids: all 0 (a valid id in any vocabulary); f32: 0.5.
  const float fill = model.inputType().dtype == DType::I32 ? 0.0f : 0.5f;
  std::vector<float> x(size_t(model.inputType().elements()), fill), output(size_t(model.outputType().elements()));
  model.run(x.data(), output.data()); // warm up
  std::vector<double> us;
  auto begin = std::chrono::steady_clock::now();
  int target = opts.benchRuns;
  for (int i = 0; target ? i < target : (i < 10000 && (i < 20 || std::chrono::steady_clock::now() - begin < std::chrono::seconds(1))); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    model.run(x.data(), output.data());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  double med = medianOf(us), best = *std::min_element(us.begin(), us.end());
  const StepProfile profile = opts.profile ? profileSteps(m, model, x, output, int(us.size())) : StepProfile{};
  double gflops = 2.0 * double(m.analysis.totals.macs) / (med * 1e3);
  runtime::PeakFlops peak = runtime::measurePeakFlops(model.threads());
  double share = peak.gflops > 0 ? gflops / peak.gflops : 0;
  // --activations i8 goes with i8 weights, or i4 (--dtype i4); bf16 with bf16
  const std::string products = codegen::productInstruction(
      opts.activations, opts.dtype.value_or(opts.activations), jit.features(), jit.microKernel());
  runtime::CompileStats stats = jit.compileStats();
  std::string cacheDir = jit.cacheDir();
  if (opts.format == Format::Json) {
    nlohmann::ordered_json j{{"median_us", med}, {"min_us", best}, {"gflops", gflops},
                             {"compile_ms", model.compileMillis()}, {"runs", us.size()},
                             {"threads", model.threads()}, {"batch", m.graph.batch},
                             {"arena_bytes", model.program().arenaBytes()},
                             {"run_stack_bytes", model.runStackBytes()},
                             {"peak_gflops", peak.gflops}, {"share_of_peak", share},
                             {"peak_isa", peak.isa},
                             {"products", products},
                             {"kernel_row", jit.microKernel().family},
                             {"kernel_row_choice", jit.rowChoice()},
                             {"kernel_row_half_rate", jit.microKernel().halfRate},
                             {"denormals", runtime::denormalsName(model.denormals())},
                             {"weight_prefetch_16bit", jsonOrNull(jit.weightPrefetch().describe())},
                             {"weight_prefetch_dot", jsonOrNull(jit.dotWeightPrefetch().describe())},
                             {"one_row_panels", jsonOrNull(jit.panelPairing().describe())},
                             {"kernels_compiled", stats.compiled}, {"kernels_from_cache", stats.fromCache},
                             {"compile_breakdown_ms", {{"jit_setup", jitSetupMillis},
                                                       {"ir_emission", stats.emitMillis},
                                                       {"optimisation", stats.optimiseMillis},
                                                       {"codegen", stats.codegenMillis},
                                                       {"link", stats.linkMillis},
                                                       {"cache_load", stats.loadMillis}}},
                             {"load_ms", load.total},
                             {"load_breakdown_ms", {{"read_weights", load.read},
                                                    {"set_weights", load.total - load.read}}},
                             {"kernel_cache", jsonOrNull(cacheDir)}};
    if (opts.profile) {
      j["profile"] = kindsJson(profile);
      j["layers"] = layersJson(profile, true);
      j["slowest_layers"] = layersJson(profile, true, kSlowestLayers);
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("model {} batch {} threads {}: median {:.2f} us, best {:.2f} us over {} runs; {:.2f} GFLOP/s\n",
             m.graph.modelName, m.graph.batch, model.threads(), med, best, us.size(), gflops);
  fmt::print("that is {:.1f}% of this machine's measured peak of {:.1f} GFLOP/s (f32 {} FMA, {} thread{})\n",
             100 * share, peak.gflops, peak.isa, peak.threads, peak.threads == 1 ? "" : "s");
  if (opts.activations != DType::F32)
    fmt::print("{} activations: the products run on {}; the peak above is f32's\n", dtypeName(opts.activations),
               products);
  fmt::print("kernels: CpuTable row {} ({}{}{})\n", jit.microKernel().family, jit.rowChoice(),
             jit.microKernel().halfRate ? ", measured at half rate: 512-bit FMAs as two halves" : "",
             jit.rowChoice() == "NNC_ISA" ? "" : "; NNC_ISA=avx512|avx2|avx|sse2 forces one");
  if (const std::string prefetch = jit.describeStreaming(); !prefetch.empty())
    fmt::print("weights streamed at batch 1: {}\n", prefetch);
  fmt::print("subnormal values: {}\n", model.denormals() == runtime::Denormals::Flush
                                            ? "flushed to zero (--denormals keep computes with them)"
                                            : "kept (--denormals keep)");
  fmt::print("compile {:.1f} ms: {} kernel{} compiled, {} from the kernel cache{}\n", model.compileMillis(),
             stats.compiled, stats.compiled == 1 ? "" : "s", stats.fromCache,
             cacheDir.empty() ? " (off)" : fmt::format(" ({})", cacheDir));
  if (stats.compiled)
    fmt::print("  compiling (summed over kernels; they compile side by side): IR {:.1f} ms, O3 {:.1f} ms, "
               "codegen {:.1f} ms; then linking {:.1f} ms\n",
               stats.emitMillis, stats.optimiseMillis, stats.codegenMillis, stats.linkMillis);
  if (stats.fromCache) fmt::print("  linking cached kernels: {:.1f} ms\n", stats.loadMillis);
  fmt::print("  JIT set-up before that: {:.1f} ms\n", jitSetupMillis);
  fmt::print("weights: {:.1f} ms to ready ({:.1f} ms {} them, {:.1f} ms preparing and packing)\n", load.total,
             load.read, opts.randomSeed ? "drawing" : "reading", load.total - load.read);
  fmt::print("stack: a run takes {:.0f} KiB (its deepest kernel's frames + {} KiB); from a thread with less left, "
             "it runs on a thread of nnc's own\n",
             double(model.runStackBytes()) / 1024, runtime::kRunFrameBytes >> 10);
  if (!opts.profile) return;
  printProfile(profile,
               fmt::format("time per layer kind and kernel (median over {} profiled runs; steps timed one by one):",
                           us.size()),
               true, [](const std::string &line) { fmt::print("{}", line); });
}

} // namespace

void checkRunMemory(const Options &opts, const lower::KernelProgram &program,
                    const codegen::MicroKernelShape &microKernel, int64_t inputBytes,
                    const lower::KernelProgram *decodeStep) {
  std::error_code ec;
  const int64_t weightsFileBytes = opts.weights.empty() ? 0 : int64_t(std::filesystem::file_size(opts.weights, ec));
  const int64_t limit = opts.maxMemory ? *opts.maxMemory : runtime::availableMemoryBytes();
  if (limit <= 0) return; // the machine does not say
  runtime::checkMemoryBill(runtime::memoryBill(program, microKernel, ec ? 0 : weightsFileBytes, inputBytes, decodeStep),
                           program.model, program.batch, limit,
                           opts.maxMemory ? "the limit given" : "the memory this machine has available");
}

int runModel(const Options &opts) {
  driver::Compiler file = openProgram(opts);
  // Read before anything is compiled, so a mistake in it is reported at once.
  const runtime::WeightMap weightMap = readWeightMap(opts);
  auto sets = opts.sets;
  if (opts.action == Action::Emit && opts.emit == "ir") {
    std::string ir;
    std::string after = opts.printAfter.empty() ? "shape-inference" : opts.printAfter;
    auto names = driver::passNames();
    if (std::find(names.begin(), names.end(), after) == names.end())
      throw UsageError(fmt::format("--print-after: no pass named '{}' (passes: {})", after, fmt::join(names, ", ")));
    file.analyze(compileOptions(opts, sets), [&](const char *name, const ir::Graph &g) {
      if (after == name) ir = ir::printGraph(g);
    });
    fmt::print("{}", ir);
    return 0;
  }

  // A run's .npy may set another batch: its warnings wait for the model that runs
  // (the other actions show them now).
  driver::CompileOptions first = compileOptions(opts, sets);
  first.holdWarnings = opts.action == Action::Run;
  AnalyzedModel m = file.analyze(first);
  WarningsAtExit warnings{file, m};
  requireQuantisedWeights(opts, m);
  std::unique_ptr<runtime::JitEngine> jit;
  double jitSetupMillis = 0;
  auto makeJit = [&] {
    if (jit) return;
    auto jitStart = std::chrono::steady_clock::now();
    jit = runtime::JitEngine::create(kernelCacheOptions(opts));
    jitSetupMillis = millisSince(jitStart);
  };
  // The run's whole memory, summed before any of it is taken (runtime/model/MemoryBill.h).
  auto checkMemory = [&](int64_t inputBytes) {
    makeJit(); // its micro-kernel sets the packed panels' size
    checkRunMemory(opts, m.program, jit->microKernel(), inputBytes);
  };
  InputData input;
  if (opts.action != Action::Emit || opts.emit != "plan")
    if (m.program.firstNotRunnable()) // name the layer before reading any input
      driver::compileModel(m, *runtime::JitEngine::create(runtime::KernelCacheOptions{}), 1);
  if (opts.action == Action::Run) {
    input = readInput(opts, m.graph.modelName, m.graph.ops[0].type, [&](int64_t batch, int64_t inputBytes) {
      if (batch && batch != m.graph.batch) {
        sets["batch"] = batch;
        m.heldWarnings.clear(); // of a model that does not run
        m = file.analyze(compileOptions(opts, sets));
      }
      file.showWarnings(m);
      checkMemory(inputBytes);
    });
  }
  if (opts.action == Action::Emit && opts.emit == "plan") {
    fmt::print("{}", lower::printProgram(m.program));
    return 0;
  }
  if (opts.action == Action::Bench) checkMemory(m.program.inputType.elements() * 4);
  makeJit();
  int threads = opts.threads ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::unique_ptr<runtime::CompiledModel> model = driver::compileModel(m, *jit, threads, denormalsOf(opts));

  if (opts.action == Action::Emit) {
    const auto form = opts.emit == "llvm" ? runtime::JitEngine::EmitForm::LLVM : runtime::JitEngine::EmitForm::Assembly;
    for (const auto &spec : model->kernels())
      fmt::print("; ---- {} ----\n{}\n", codegen::kernelKey(spec), jit->emit(spec, form));
    return 0;
  }

  const auto loadStart = std::chrono::steady_clock::now();
  auto weights = std::make_shared<const runtime::WeightStore>(loadWeights(opts, model->program(), m.graph.modelName, weightMap));
  const double readMillis = millisSince(loadStart);
  if (opts.action == Action::Bench) {
    model->setWeights(*weights);
    bench(opts, m, *model, *jit, jitSetupMillis, LoadTimes{millisSince(loadStart), readMillis});
    return 0;
  }

  // One run: on fewer threads than cores, the free cores make the weights while it runs
  // (CompiledModel::setWeightsWhileRunning).
  model->setWeightsWhileRunning(std::move(weights));
  std::vector<float> output(size_t(model->outputType().elements()));
  model->run(input.values.data(), output.data());
  if (!opts.output.empty()) {
    writeOutputFile(opts.output, model->outputType().shape, output);
    printStatus(opts, fmt::format("wrote {} output to {}\n{}", model->outputType().str(), opts.output,
                                  nonFiniteSummary(output)));
  } else {
    printSummary(model->outputType(), output);
    fmt::print("{}", nonFiniteSummary(output));
  }
  return 0;
}

} // namespace nnc::cli
