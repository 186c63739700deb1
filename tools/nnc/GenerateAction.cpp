// --generate: continue a prompt of token ids by N tokens (greedy, or sampled with a
// seed) over a KV cache, with a runtime::Decoder over two programs of the model: the
// prompt's length and one position, both lowered for the model's context (its `seq`).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "Actions.h"
#include "Frontend.h"
#include "StepProfile.h"
#include <nlohmann/json.hpp>

#include "compiler/codegen/CpuTable.h"
#include "compiler/support/Error.h"
#include "runtime/BandwidthProbe.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorFiles.h"
#include "runtime/io/WeightMap.h"
#include "runtime/model/CompiledModel.h"
#include "runtime/model/Decoder.h"
#include "runtime/model/Sampler.h"
#include "runtime/model/StopIds.h"

namespace nnc::cli {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

int generateText(const Options &opts) {
  const runtime::WeightMap weightMap = readWeightMap(opts);
  driver::Compiler file = openProgram(opts);
  auto sets = opts.sets;
  // The context: the model as given (its seq parameter, --set seq=N).
  // Its warnings wait for the prompt's batch: those of the model at it are shown.
  driver::CompileOptions asWritten = compileOptions(opts, sets);
  asWritten.holdWarnings = true;
  driver::AnalyzedModel whole = file.analyze(asWritten);
  WarningsAtExit warnings{file, whole};
  const std::string name = whole.graph.modelName;
  driver::requireLanguageModel(whole, "--generate");
  requireQuantisedWeights(opts, whole);
  driver::requireIdsFedBack(whole, "--generate");
  const int64_t context = whole.program.inputType.shape[1];

  NpyArray prompt = readNpy(opts.prompt, DType::I32, [&](const NpyHeader &h) {
    if (h.shape.empty() || h.shape.size() > 2 || h.shape.back() < 1 || (h.shape.size() == 2 && h.shape[0] < 1))
      throw UserError(fmt::format("{}: a prompt is token ids of shape [length] or [batch, length], found [{}]{}",
                                  opts.prompt, fmt::join(h.shape, ", "),
                                  !h.shape.empty() && h.shape.size() <= 2 && (h.shape.back() < 1 || h.shape[0] < 1)
                                      ? " (an empty prompt: at least one token is needed)"
                                      : ""));
    const int64_t length = h.shape.back(), rows = h.shape.size() == 2 ? h.shape[0] : 1;
    // As --run's input: an explicit --batch (--set batch=) the prompt contradicts is an error.
    if (auto given = opts.sets.find("batch"); given != opts.sets.end() && given->second != rows)
      throw UserError(fmt::format("{}: the prompt holds a batch of {} (shape [{}]), but --batch {} was given; the "
                                  "prompt's leading axis sets the batch: drop --batch, or give a prompt of batch {}",
                                  opts.prompt, rows, fmt::join(h.shape, ", "), given->second, given->second));
    if (length + opts.generateTokens > context)
      throw UserError(fmt::format("{}: a prompt of {} and {} need {} positions, but model '{}' has a "
                                  "context of {} ({})",
                                  opts.prompt, counted(length, "token", "tokens"),
                                  counted(opts.generateTokens, "new one", "new ones"), length + opts.generateTokens, name,
                                  context,
                                  driver::longerContextHint(whole.graph, length + opts.generateTokens,
                                                            [](const std::string &param, const std::string &value) {
                                                              return fmt::format("--set {}={}", param, value);
                                                            })));
  });
  const int64_t batch = prompt.shape.size() == 2 ? prompt.shape[0] : 1, length = prompt.shape.back();
  sets["batch"] = batch;
  if (batch != whole.program.batch) { // the warnings of the model at the prompt's batch, shown as it is analysed
    whole.heldWarnings.clear();         // (those of a model that does not run)
    file.analyze(compileOptions(opts, sets));
  }
  file.showWarnings(whole);

  // The two programs, lowered for the context: the prompt's length, and one position;
  // greedy (temperature 0), each ends with the Argmax step that picks the next ids
  // (docs/lowering.md, "Greedy decoding"), so no host pass over the logits.
  const bool greedy = opts.temperature <= 0;
  auto decoderProgram = [&](int64_t seq) {
    driver::CompileOptions options = compileOptions(opts, sets);
    options.argmax = greedy;
    options.holdWarnings = true; // the model's own are shown above (an error still shows them)
    return driver::analyzeDecoderProgram(file, options, seq, whole);
  };
  driver::AnalyzedModel prefillProgram = decoderProgram(length), stepProgram = decoderProgram(1);
  const int64_t vocab = prefillProgram.program.outputType.shape[2];
  for (int32_t id : opts.stopIds) // one the model cannot produce would never end a row
    if (id >= vocab)
      throw UserError(fmt::format("--stop {} is outside the vocabulary [0, {}) of model '{}'", id, vocab, name));

  const auto start = std::chrono::steady_clock::now();
  auto jit = runtime::JitEngine::create(kernelCacheOptions(opts)); // its warning printed, as --run's
  // The memory the run takes, before any of it is taken (--max-memory): the prompt's
  // program with its KV cache, and the one-position program's arena when it runs.
  checkRunMemory(opts, prefillProgram.program, jit->microKernel(), int64_t(prompt.data.size()),
                 opts.generateTokens > 1 ? &stepProgram.program : nullptr);
  const int threads = opts.threads ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  jit->deferWeightPrefetchChoice(true); // measured, when needed, with the decode program
  auto prefill = driver::compileModel(prefillProgram, *jit, threads, denormalsOf(opts));
  jit->deferWeightPrefetchChoice(false);
  const double compileSeconds = secondsSince(start);
  const auto loadStart = std::chrono::steady_clock::now();
  const auto weights =
      std::make_shared<const runtime::WeightStore>(loadWeights(opts, prefill->program(), name, weightMap));
  const double readSeconds = secondsSince(loadStart);
  // On fewer threads than cores, the cores left free make the weights while the prompt
  // runs, each layer's before its steps (CompiledModel::setWeightsWhileRunning); not
  // under --profile, whose step times are the kernels' own.
  bool whilePrompt = false;
  if (opts.profile) prefill->setWeights(*weights);
  else whilePrompt = prefill->setWeightsWhileRunning(weights);
  runtime::Decoder decoder(*prefill);
  const double readySeconds = secondsSince(start);
  // --profile: every step timed (StepProfile.h), the prompt's run and the decode steps'.
  std::vector<double> prefillMicros(prefill->program().steps.size()), stepMicros;
  if (opts.profile) decoder.timeSteps(&prefillMicros, nullptr);

  runtime::Sampler sampler(opts.temperature, opts.topK, opts.topP, opts.sampleSeed);
  runtime::StopIds stops(opts.stopIds, batch);
  const int64_t asked = opts.generateTokens;
  std::vector<int32_t> made(static_cast<size_t>(batch * asked)), next(static_cast<size_t>(batch));
  auto pick = [&](const std::vector<float> &logits, int64_t i) {
    for (int64_t b = 0; b < batch; ++b) {
      runtime::requireLogitsWithoutNaN(&logits[size_t(b * vocab)], vocab, name, b, i);
      made[size_t(b * asked + i)] = next[size_t(b)] =
          stops.keep(b, greedy ? decoder.nextIds()[size_t(b)] : sampler.next(&logits[size_t(b * vocab)], vocab));
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  pick(decoder.prefill(reinterpret_cast<const int32_t *>(prompt.data.data())), 0);
  const double prefillSeconds = secondsSince(t0);
  const double loadSeconds = readSeconds + prefill->weightsMillis() / 1e3; // the prompt needed every constant
  // The one-position program once the first token is there: that token does not wait
  // for it, and --generate 1 (or a first token that ends every row) never compiles it
  // (docs/cli.md, "--generate").
  std::unique_ptr<runtime::CompiledModel> step;
  double stepReadySeconds = 0;
  if (asked > 1 && !stops.allEnded()) {
    t0 = std::chrono::steady_clock::now();
    step = driver::compileModel(stepProgram, *jit, threads, denormalsOf(opts));
    step->setWeights(*weights, prefill.get());
    decoder.setStep(*step);
    stepReadySeconds = secondsSince(t0);
    stepMicros.resize(step->program().steps.size());
    if (opts.profile) decoder.timeSteps(&prefillMicros, &stepMicros);
  }
  t0 = std::chrono::steady_clock::now();
  int64_t n = 1; // new ids per row so far
  for (; n < asked && !stops.allEnded(); ++n) pick(decoder.decode(next.data()), n);
  const double decodeSeconds = n > 1 ? secondsSince(t0) : 0.0; // no step: no decode time

  const std::vector<int32_t> fresh = runtime::StopIds::firstColumns(made, batch, asked, n);

  // A decode step reads every GEMM weight once (the step program shares the prefill's
  // packed constants; embeddings are gathered a row at a time): those bytes per second
  // against a plain read of the same bytes say how close decoding runs to the memory
  // limit (docs/cli.md, "--generate").
  const runtime::CompiledModel &streamed = step ? *step : *prefill;
  const double weightBytes = double(streamed.packedConstantBytes());
  const double decodeGBs = n > 1 ? weightBytes * double(n - 1) / decodeSeconds / 1e9 : 0.0;
  const double probeGBs =
      n > 1 ? runtime::measureReadBandwidth(threads, streamed.packedConstantSpans()).gbPerSecond : 0.0;
  // --profile, per run: the prompt's one run, and the decode steps' mean.
  for (double &us : stepMicros) us /= double(std::max<int64_t>(1, n - 1));
  const StepProfile prefillProfile = opts.profile ? summarizeSteps(prefill->program(), prefillMicros) : StepProfile{};
  const StepProfile decodeProfile =
      opts.profile && step ? summarizeSteps(step->program(), stepMicros) : StepProfile{};
  const std::string mode = !greedy ? fmt::format("sampled: temperature {}, top-k {}, top-p {}, seed {}",
                                                  opts.temperature, opts.topK ? std::to_string(opts.topK) : "all",
                                                  opts.topP, opts.sampleSeed)
                                    : "greedy";
  if (opts.format == Format::Json) {
    nlohmann::ordered_json ids = nlohmann::ordered_json::array();
    for (int64_t b = 0; b < batch; ++b)
      ids.push_back(std::vector<int32_t>(fresh.begin() + b * n, fresh.begin() + (b + 1) * n));
    nlohmann::ordered_json j{{"model", name}, {"batch", batch}, {"threads", threads}, {"context", context},
                             {"prompt", length}, {"new_tokens", n}, {"sampling", mode},
                             {"kv_dtype", std::string(dtypeName(opts.kvDtype))},
                             {"kv_cache_bytes", decoder.kvCacheBytes()},
                             {"ready_ms", readySeconds * 1e3},
                             {"compile_ms", compileSeconds * 1e3}, {"load_ms", loadSeconds * 1e3},
                             {"weights_from_cache", prefill->weightsFromCache()},
                             {"weights_while_prompt", whilePrompt},
                             {"prefill_ms", prefillSeconds * 1e3},
                             {"prefill_tokens_per_s", double(batch * length) / prefillSeconds},
                             {"step_ready_ms", stepReadySeconds * 1e3},
                             {"decode_ms", decodeSeconds * 1e3},
                             {"decode_tokens_per_s", n > 1 ? double(batch * (n - 1)) / decodeSeconds : 0.0},
                             {"weight_bytes", int64_t(weightBytes)}, {"decode_weight_gbps", decodeGBs},
                             {"read_probe_gbps", probeGBs},
                             {"weight_prefetch_16bit", jsonOrNull(jit->weightPrefetch().describe())},
                             {"weight_prefetch_dot", jsonOrNull(jit->dotWeightPrefetch().describe())},
                             {"one_row_panels", jsonOrNull(jit->panelPairing().describe())},
                             {"ids", ids}};
    if (opts.profile) {
      j["prefill_profile"] = kindsJson(prefillProfile);
      j["prefill_slowest_layers"] = layersJson(prefillProfile, false, kSlowestLayers);
      j["decode_profile"] = kindsJson(decodeProfile);
      j["decode_slowest_layers"] = layersJson(decodeProfile, false, kSlowestLayers);
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    for (int64_t b = 0; b < batch; ++b)
      fmt::print("{}{}\n", batch > 1 ? fmt::format("[{}] ", b) : "",
                 fmt::join(fresh.begin() + b * n, fresh.begin() + (b + 1) * n, " "));
    printStatus(opts, fmt::format(
               "model {} batch {} threads {}: context {}, prompt {}, {} new token{} ({})\n"
               "  ready in {:.0f} ms (compile {:.0f}, weights {:.0f}{}); prefill {:.2f} ms = {:.1f} tokens/s; "
               "{}\n",
               name, batch, threads, context, length, n, n == 1 ? "" : "s", mode, readySeconds * 1e3,
               compileSeconds * 1e3, loadSeconds * 1e3,
               prefill->weightsFromCache() ? ", mapped from the weight cache"
               : whilePrompt               ? ", made on the free cores as the prompt ran"
                                           : "",
               prefillSeconds * 1e3, double(batch * length) / prefillSeconds,
               n > 1 ? fmt::format("decode {:.2f} ms = {:.2f} tokens/s (its program ready in {:.0f} ms, after the "
                                   "first token)",
                                   decodeSeconds * 1e3, double(batch * (n - 1)) / decodeSeconds, stepReadySeconds * 1e3)
                     : "no decode step (the first token was the last)"));
    // Weights that fit in the last-level cache stay there from step to step: a rate
    // against a read of them means little (a tiny GPT-2's 0.2 MB: "651 % of the probe").
    const int64_t cached = codegen::hostCacheSizes().l3 > 0 ? codegen::hostCacheSizes().l3 : codegen::hostCacheSizes().l2;
    if (n > 1)
      printStatus(opts, fmt::format("  decoding streams {} of GEMM weights per token: {:.1f} GB/s, {}\n",
                  weightBytes >= 1e8 ? fmt::format("{:.2f} GB", weightBytes / 1e9) // a small model's in MB, not "0.00 GB"
                                     : fmt::format("{:.3f} MB", weightBytes / 1e6),
                  decodeGBs,
                  weightBytes <= double(cached)
                      ? fmt::format("from the caches (they fit in the {} MiB {})", cached >> 20,
                                    codegen::hostCacheSizes().l3 > 0 ? "L3" : "L2")
                      : fmt::format("{:.0f}% of this machine's read probe ({:.1f} GB/s, {} thread{})",
                                    100 * decodeGBs / probeGBs, probeGBs, threads, threads == 1 ? "" : "s")));
    if (const std::string prefetch = jit->describeStreaming(); !prefetch.empty())
      printStatus(opts, fmt::format("  weights streamed at batch 1: {}\n", prefetch));
    if (opts.profile) {
      auto toStderr = [&](const std::string &line) { printStatus(opts, line); };
      printProfile(prefillProfile, fmt::format("prefill: time per layer kind and kernel ({} positions, one run; steps "
                                               "timed one by one):", length), false, toStderr);
      if (step)
        printProfile(decodeProfile, fmt::format("decode: time per layer kind and kernel (a step's mean over {} "
                                                "steps; steps timed one by one):", n - 1), false, toStderr);
    }
  }
  if (!opts.output.empty()) {
    NpyArray out{{batch, n}, DType::I32, std::vector<uint8_t>(fresh.size() * sizeof(int32_t))};
    std::memcpy(out.data.data(), fresh.data(), out.data.size());
    writeArrayFile(opts.output, out); // as --run's output: .npy, else raw little-endian int32
    printStatus(opts, fmt::format("wrote i32[{}, {}] new ids to {}\n", batch, n, opts.output));
  }
  return 0;
}

} // namespace nnc::cli
