#include "Frontend.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "compiler/frontend/Expander.h"
#include "compiler/frontend/Parser.h"
#include "compiler/ir/Printer.h"
#include "compiler/passes/Pipeline.h"
#include "compiler/support/Error.h"

namespace nnc::cli {

namespace {
constexpr size_t kMaxSourceBytes = 16 << 20; // a .nn file is text, not data

std::string readSource(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > kMaxSourceBytes)
    throw UserError(fmt::format("{}: file too large for a .nn program: expected at most {} bytes, found {}", path,
                                withCommas(kMaxSourceBytes), withCommas(int64_t(text.size()))));
  return text;
}
} // namespace

LoadedFile::LoadedFile(const Options &opts) : opts_(opts) {
  source_ = std::make_unique<SourceFile>(opts.file, readSource(opts.file));
  diags_ = std::make_unique<DiagnosticEngine>(source_.get());
  if (source_->text().find_first_not_of(" \t\r\n") == std::string::npos) {
    diags_->error({}, "the file is empty: expected at least one 'model NAME { input x: [dims] ... }'");
    flush();
  }
  auto prog = parseProgram(*source_, *diags_);
  flush();
  program_ = std::move(*prog);
}

void LoadedFile::flush() {
  if (!diags_->diagnostics().empty()) {
    fmt::print(stderr, "{}", diags_->render(opts_.color));
    std::fflush(stderr);
  }
  bool failed = diags_->hasErrors();
  size_t errors = diags_->errorCount();
  diags_ = std::make_unique<DiagnosticEngine>(source_.get());
  if (failed)
    throw UserError(fmt::format("{}: {} error{}", source_->path(), errors, errors == 1 ? "" : "s"));
}

AnalyzedModel LoadedFile::analyze(const std::map<std::string, int64_t> &sets, const std::string &printIrAfter,
                                  std::string *irOut) {
  ExpandOptions eo{opts_.model, sets, opts_.dtype};
  auto graph = expandModel(program_, eo, *diags_);
  flush();
  AnalyzedModel m{std::move(*graph), {}};
  passes::PassContext ctx{*diags_, m.analysis};
  auto after = [&](const char *name, const ir::Graph &g) {
    if (irOut && printIrAfter == name) *irOut = ir::printGraph(g);
  };
  passes::runPipeline(passes::analysisPipeline(), m.graph, ctx, after);
  flush();
  return m;
}

} // namespace nnc::cli
