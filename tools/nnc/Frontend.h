// Reads, parses, expands and analyses a .nn file for the command line; every problem
// is printed as a diagnostic and turns into a UserError (exit code 1).
#pragma once
#include <memory>

#include "CommandLine.h"
#include "Report.h"
#include "compiler/frontend/Ast.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::cli {

class LoadedFile {
public:
  explicit LoadedFile(const Options &opts); // reads and parses; throws UserError
  // Expands the chosen model with `sets` and runs the analysis pipeline.
  AnalyzedModel analyze(const std::map<std::string, int64_t> &sets,
                        const std::string &printIrAfter = "", std::string *irOut = nullptr);
  const SourceFile &source() const { return *source_; }

private:
  void flush(); // prints diagnostics collected so far; throws UserError on errors
  const Options &opts_;
  std::unique_ptr<SourceFile> source_;
  std::unique_ptr<DiagnosticEngine> diags_;
  ast::Program program_;
};

} // namespace nnc::cli
