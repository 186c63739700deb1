// nnc: the command line. Parses options, runs the front end and the analyses, then
// the chosen action. Exit codes (DESIGN.md): 0 ok, 1 user's program or files,
// 2 usage, 3 internal error.
#include <fmt/format.h>

#include <cstdio>

#include "Actions.h"
#include "CommandLine.h"
#include "compiler/support/Error.h"

int main(int argc, char **argv) {
  using namespace nnc;
  cli::Options opts;
  try {
    opts = cli::parseCommandLine(argc, argv);
  } catch (const UsageError &e) {
    fmt::print(stderr, "nnc: error: {}\n", e.what());
    return 2;
  }
  try {
    return cli::runAction(opts);
  } catch (const UserError &e) {
    // Diagnostics were already printed where there are any; this names the file.
    fmt::print(stderr, "nnc: error: {}{}\n", e.what(), cli::hintFor(e.topic()));
    return 1;
  } catch (const UsageError &e) {
    fmt::print(stderr, "nnc: error: {}\n", e.what());
    return 2;
  } catch (const std::bad_alloc &) {
    fmt::print(stderr, "nnc: error: out of memory\n");
    return 1;
  } catch (const std::exception &e) {
    fmt::print(stderr, "nnc: internal error: {}\nThis is a bug in nnc; please report it with the input.\n", e.what());
    return 3;
  } catch (...) {
    fmt::print(stderr, "nnc: internal error: an unexpected exception\nThis is a bug in nnc; please report it with the input.\n");
    return 3;
  }
}
