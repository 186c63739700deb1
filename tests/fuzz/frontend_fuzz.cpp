// Front end under libFuzzer: bytes -> diagnostics (rendered), or a checked IR, its
// analysis and the kernel program -> every report. A UserError (a diagnostic, a
// limit) is the expected end of a bad program; any other exception is a bug (exit 3
// in the CLI) and aborts here, as does any sanitizer report.
#include <cstdint>
#include <string>

#include "compiler/driver/Driver.h"
#include "compiler/support/Error.h"
#include "tools/nnc/Report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nnc;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string rendered;
  auto sink = [&](const DiagnosticEngine& d) { rendered += d.render(false); };
  try {
    driver::Compiler c = driver::Compiler::fromSource("fuzz.nn", std::move(text), sink);
    driver::AnalyzedModel m = c.analyze(driver::CompileOptions{});
    rendered += cli::renderText(m);
    rendered += cli::renderJson(m).dump();
    rendered += cli::renderExplain(m);
  } catch (const UserError& e) {
    rendered += e.what();
  }
  return 0;
}
