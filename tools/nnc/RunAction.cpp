// --run, --bench and --emit: lower the analysed model and execute it.
#include <fmt/format.h>

#include "Actions.h"
#include "Frontend.h"
#include "compiler/ir/Printer.h"
#include "compiler/passes/Pipeline.h"
#include "compiler/support/Error.h"

namespace nnc::cli {

int runModel(const Options &opts) {
  LoadedFile file(opts);
  if (opts.action == Action::Emit && opts.emit == "ir") {
    std::string ir;
    std::string after = opts.printAfter.empty() ? "shape-inference" : opts.printAfter;
    auto names = passes::passNames();
    if (std::find(names.begin(), names.end(), after) == names.end())
      throw UsageError(fmt::format("--print-after: no pass named '{}' (passes: {})", after, fmt::join(names, ", ")));
    AnalyzedModel m = file.analyze(opts.sets, after, &ir);
    if (ir.empty()) {
      std::vector<std::unique_ptr<passes::Pass>> lowering = passes::loweringPipeline();
      DiagnosticEngine d(&file.source());
      passes::PassContext ctx{d, m.analysis};
      passes::runPipeline(lowering, m.graph, ctx, [&](const char *name, const ir::Graph &g) {
        if (after == name) ir = printGraph(g);
      });
    }
    fmt::print("{}", ir);
    return 0;
  }
  throw UserError("running models is not built yet");
}

} // namespace nnc::cli
