#include "Frontend.h"

#include <fmt/format.h>

#include <cstdio>

namespace nnc::cli {

driver::Compiler openProgram(const Options &opts) {
  const bool color = opts.color;
  return driver::Compiler::fromFile(opts.file, [color](const DiagnosticEngine &d) {
    fmt::print(stderr, "{}", d.render(color));
    std::fflush(stderr);
  });
}

driver::CompileOptions compileOptions(const Options &opts, const std::map<std::string, int64_t> &sets) {
  return driver::CompileOptions{opts.model, sets, opts.dtype};
}

} // namespace nnc::cli
