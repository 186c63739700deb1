// The command line's use of the compiler driver (compiler/driver/Driver.h): the file
// opened with a diagnostics sink that prints to stderr (colour on a terminal only),
// and the driver options the command line's flags make.
#pragma once
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>

#include "CommandLine.h"
#include "compiler/driver/Driver.h"
#include "runtime/io/WeightMap.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/model/WeightStore.h"

namespace nnc::cli {

// Messages for stderr, which may be closed or full (`2>/dev/full`): written with
// fwrite, which reports nothing, where fmt::print would throw — and a failed message
// must not turn a run that worked into std::terminate or an error.
template <typename... Args> void printStderr(fmt::format_string<Args...> format, Args &&...args) {
  const std::string text = fmt::format(format, std::forward<Args>(args)...);
  std::fwrite(text.data(), 1, text.size(), stderr);
}

// Diagnostics go to stderr: rendered text, or with --diagnostics-format json one JSON
// object per line ({"severity", "file", "line", "column", "end_column", "message", "notes"}).
driver::Compiler openProgram(const Options &opts); // throws UserError / CompileError
std::string diagnosticJson(const SourceDiagnostic &d, const std::string &file);
driver::CompileOptions compileOptions(const Options &opts, const std::map<std::string, int64_t> &sets);
// What an action says on stderr besides its diagnostics (a file written, --generate's
// rates): text as it is, or with --diagnostics-format json one {"severity": "info",
// "message"} object per line of it, so that stderr holds JSON objects only.
void printStatus(const Options &opts, const std::string &text);
// A warning about no line of the program (the kernel cache's): "nnc: warning: ..." or
// {"severity": "warning", "message"}. Errors are printed so by main.cpp.
void printWarning(const Options &opts, const std::string &message);
// {"severity": severity, "message": message} on one line: a diagnostic without a program.
std::string plainDiagnosticJson(const std::string &severity, const std::string &message);
// The kernel cache of the environment (NNC_CACHE, NNC_CACHE_DIR), whose warning (a
// directory that cannot be written) goes to stderr once, for every action that compiles.
runtime::KernelCacheOptions kernelCacheOptions(const Options &opts);
// --weight-map FILE, read before anything is compiled so that a mistake in it is
// reported at once; no renaming without the flag.
runtime::WeightMap readWeightMap(const Options &opts);
// The weights every action that runs takes: --random-weights SEED, or --weights FILE
// with its tensors renamed by `map` (readWeightMap), for the tensors `program` reads.
runtime::WeightStore loadWeights(const Options &opts, const lower::KernelProgram &program, const std::string &model,
                                 const runtime::WeightMap &map);
// --quant sets the scales of i8 weights and --quant-group those of i4 ones: given for a
// model that stores none (by --dtype or a layer's dtype=), either would do nothing
// (docs/cli.md, "Actions"). Throws UserError.
void requireQuantisedWeights(const Options &opts, const driver::AnalyzedModel &m);

// An action whose input or prompt sets the batch analyses the model first with its
// warnings held (CompileOptions::holdWarnings), then shows the warnings of the model at
// that batch. This shows what is still held when the scope ends: an error on the way
// (the input cannot be read) still comes after the model's warnings.
struct WarningsAtExit {
  const driver::Compiler &file;
  driver::AnalyzedModel &model;
  ~WarningsAtExit() {
    try {
      file.showWarnings(model);
    } catch (...) { // a message that cannot be formatted must not end the process
    }
  }
};

} // namespace nnc::cli
