// The command line's use of the compiler driver (compiler/driver/Driver.h): the file
// opened with a diagnostics sink that prints to stderr (colour on a terminal only),
// and the driver options the command line's flags make.
#pragma once
#include <map>
#include <string>

#include "CommandLine.h"
#include "compiler/driver/Driver.h"

namespace nnc::cli {

driver::Compiler openProgram(const Options &opts); // throws UserError / CompileError
driver::CompileOptions compileOptions(const Options &opts, const std::map<std::string, int64_t> &sets);

} // namespace nnc::cli
