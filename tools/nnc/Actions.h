// The actions of the command line: report (and check, sweep, explain), emit, run,
// bench. Each returns the process exit code.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "CommandLine.h"
#include "compiler/codegen/KernelSpec.h"
#include "compiler/lower/KernelProgram.h"
#include "compiler/support/Error.h"

namespace nnc::cli {
// The flag that helps with an error of this topic ("; drop dtype= / --dtype ..."), or "".
std::string hintFor(UserError::Topic topic);
int runAction(const Options &opts);
int runModel(const Options &opts);   // --run, --bench, --emit plan|llvm|asm (RunAction.cpp)
int generateText(const Options &opts); // --generate (GenerateAction.cpp)
int compareDTypes(const Options &opts); // --compare-dtypes (CompareDTypes.cpp)
// The run's whole memory (runtime/model/MemoryBill.h) against --max-memory or what the
// machine has, before any of it is taken; a UserError naming the parts when it does not
// fit (RunAction.cpp).
void checkRunMemory(const Options &opts, const lower::KernelProgram &program,
                    const codegen::MicroKernelShape &microKernel, int64_t inputBytes,
                    const lower::KernelProgram *decodeStep = nullptr);
// A JSON report's optional text field: null when there is nothing to say.
inline nlohmann::ordered_json jsonOrNull(const std::string &text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}
}
