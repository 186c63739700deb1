// Errors that leave the compiler as exceptions. Each maps to one exit code of the
// command-line contract (DESIGN.md): a problem in the user's program or files (1),
// bad usage (2). Anything else reaching main is an internal error (3).
#pragma once
#include <stdexcept>
#include <string>

namespace nnc {

// A problem in the user's program, input or weight files. The message is complete:
// it names the file and says what was expected and what was found.
class UserError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A command line that does not follow the contract.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace nnc
