// The actions of the command line: report (and check, sweep, explain), emit, run,
// bench. Each returns the process exit code.
#pragma once
#include "CommandLine.h"

namespace nnc::cli {
int runAction(const Options &opts);
int runModel(const Options &opts);   // --run, --bench, --emit llvm|asm (RunAction.cpp)
}
