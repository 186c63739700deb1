// Parsing: source text → AST. ANTLR's generated parser does the recognising; this
// file owns the error listener (ANTLR's console output never reaches the user: its
// messages are rewritten into our diagnostics) and the parse-tree → AST conversion.
#pragma once
#include <optional>

#include "compiler/frontend/Ast.h"
#include "compiler/support/Diagnostics.h"

namespace nnc {

// Returns the AST, or nullopt after reporting every syntax error found to `diags`.
std::optional<ast::Program> parseProgram(const SourceFile &file, DiagnosticEngine &diags);

// Deepest nesting of ( and { that the parser accepts: deeper input is rejected with an
// error before parsing, so no input can exhaust the stack.
inline constexpr int kMaxNesting = 200;

} // namespace nnc
