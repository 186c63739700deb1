// `nnc --emit plan`: the kernel program as text — buffers with their arena offsets and
// sizes, the weight recipes, and each step with its kernel and operands. A user reads
// it to see what nnc will do; tests read it to check lowering without running.
#pragma once
#include <string>

#include "compiler/lower/KernelProgram.h"

namespace nnc::lower {

std::string printProgram(const KernelProgram &p);

// The operand names of a kernel family, in KernelOperands order ("A", "B", ...).
std::vector<const char *> operandNames(const codegen::KernelSpec &spec);

} // namespace nnc::lower
