#include "Actions.h"

#include <llvm/Config/llvm-config.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "Frontend.h"
#include "Report.h"
#include "compiler/support/Error.h"
#include "runtime/BandwidthProbe.h"
#include "runtime/PeakProbe.h"

namespace nnc::cli {

namespace {
int report(const Options &opts, const driver::Compiler &file) {
  if (!opts.sweepName.empty()) {
    std::vector<SweepRow> rows;
    for (int64_t v : opts.sweepValues) {
      auto sets = opts.sets;
      sets[opts.sweepName] = v;
      rows.push_back({v, file.analyze(compileOptions(opts, sets))});
    }
    if (opts.format == Format::Json) fmt::print("{}\n", renderSweepJson(opts.sweepName, rows).dump(2));
    else fmt::print("{}", renderSweep(opts.sweepName, rows, opts.format == Format::Markdown));
    return 0;
  }
  AnalyzedModel m = file.analyze(compileOptions(opts, opts.sets));
  switch (opts.format) {
  case Format::Json: fmt::print("{}\n", renderJson(m).dump(2)); break;
  case Format::Markdown: fmt::print("{}", renderMarkdown(m, opts.expand)); break;
  case Format::Text: fmt::print("{}", renderText(m, opts.expand)); break;
  }
  if (opts.explain) fmt::print("\n{}", renderExplain(m));
  if (!opts.svg.empty()) {
    // The roof is this host's, measured with the threads --run would use.
    const int threads = opts.threads ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    const runtime::PeakFlops peak = runtime::measurePeakFlops(threads);
    const MachineRoof roof{peak.gflops, runtime::measureReadBandwidth(threads).gbPerSecond, peak.threads, peak.isa};
    std::ofstream out(opts.svg, std::ios::binary);
    if (!(out << renderSvg(m, roof)))
      throw UserError(fmt::format("{}: cannot write the picture: {}", opts.svg, std::strerror(errno)));
  }
  return 0;
}
} // namespace

std::string hintFor(UserError::Topic topic) {
  switch (topic) {
  case UserError::Topic::StorageDType: return "; drop dtype= / --dtype to run it at f32";
  case UserError::Topic::ActivationMemory: return "; try a smaller --batch";
  case UserError::Topic::Memory:
    return "\n(--max-memory BYTES sets the limit; a smaller --batch shrinks the arena and input)";
  case UserError::Topic::DecoderMemory:
    return "\n(--max-memory BYTES sets the limit; a prompt of fewer rows shrinks the arena and the KV cache, a "
           "shorter context the KV cache)";
  case UserError::Topic::General: break;
  }
  return "";
}

int runAction(const Options &opts) {
  if (opts.action != Action::Help && opts.action != Action::Version) checkOutputFiles(opts);
  switch (opts.action) {
  case Action::Help:
    fmt::print("{}", usageText());
    return 0;
  case Action::Version:
    fmt::print("nnc {} (.nn language version 1), built with LLVM {}\n", NNC_VERSION, LLVM_VERSION_STRING);
    return 0;
  case Action::Check: {
    AnalyzedModel m = openProgram(opts).analyze(compileOptions(opts, opts.sets));
    size_t layers = 0;
    for (size_t i = 1; i < m.graph.ops.size(); ++i) layers += m.graph.ops[i].isLayer; // ops[0] is the input
    fmt::print("{}: model {} is well formed ({} layer{}, output {})\n", opts.file, m.graph.modelName, layers,
               layers == 1 ? "" : "s", m.graph.op(m.graph.output).type.str());
    return 0;
  }
  case Action::Report: {
    return report(opts, openProgram(opts));
  }
  case Action::Emit:
  case Action::Run:
  case Action::Bench:
    return runModel(opts);
  case Action::Generate:
    return generateText(opts);
  case Action::CompareDTypes:
    return compareDTypes(opts);
  }
  return 0;
}

} // namespace nnc::cli
