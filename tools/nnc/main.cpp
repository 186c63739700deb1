// nnc: the command line. Parses options, runs the front end and the analyses, then
// the chosen action. Exit codes (docs/cli.md): 0 ok, 1 user's program or files,
// 2 usage, 3 internal error.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "Actions.h"
#include "Frontend.h"
#include "CommandLine.h"
#include "runtime/EnvironmentSwitch.h"
#include "compiler/driver/Driver.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"


namespace {
bool jsonDiagnostics = false; // --diagnostics-format json: stderr holds JSON objects only

// An error that is not a located diagnostic ("nnc: error: ..."), as text or JSON; cut
// to a bounded length (nnc::clipMessage) whatever it quotes.
void printError(const char *kind, const std::string &fullMessage) {
  const std::string message = nnc::clipMessage(fullMessage);
  if (jsonDiagnostics) nnc::cli::printStderr("{}\n", nnc::cli::plainDiagnosticJson(kind, message));
  else nnc::cli::printStderr("nnc: {}: {}\n", kind, message);
}
} // namespace

int main(int argc, char **argv) {
  using namespace nnc;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--diagnostics-format" && std::string(argv[i + 1]) == "json") jsonDiagnostics = true;
  cli::Options opts;
  try {
    opts = cli::parseCommandLine(argc, argv);
    if (opts.action != cli::Action::Help && opts.action != cli::Action::Version) runtime::checkEnvironment();
  } catch (const UsageError &e) {
    printError("error", e.what());
    return 2;
  }
  try {
    const int code = cli::runAction(opts);
    // What is still buffered for stdout: a full disk or a closed stdout is an error,
    // not an exit 0 with the output lost.
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      printError("error", fmt::format("cannot write the output to standard output{}",
                                      errno ? fmt::format(": {}", std::strerror(errno)) : std::string()));
      return 1;
    }
    return code;
  } catch (const driver::CompileError &e) {
    // The diagnostics were printed as they came; this names the file and the count.
    if (!jsonDiagnostics) printError("error", e.what());
    return 1;
  } catch (const UserError &e) {
    printError("error", e.what() + cli::hintFor(e.topic()));
    return 1;
  } catch (const UsageError &e) {
    printError("error", e.what());
    return 2;
  } catch (const std::bad_alloc &) {
    printError("error", "out of memory");
    return 1;
  } catch (const std::system_error &e) {
    // The system refused something: a thread at the process's thread limit (EAGAIN),
    // a write to a full disk or a closed stdout (fmt's "cannot write to file"). The
    // machine's state, not a bug.
    const bool threads = e.code() == std::errc::resource_unavailable_try_again;
    printError("error", std::string(e.what()) + (threads ? " (the process's thread limit, `ulimit -u`?)" : ""));
    return 1;
  } catch (const std::exception &e) {
    printError("internal error", std::string(e.what()) + "\nThis is a bug in nnc; please report it with the input.");
    return 3;
  } catch (...) {
    printError("internal error", "an unexpected exception\nThis is a bug in nnc; please report it with the input.");
    return 3;
  }
}
