// runEach and the pool at the process's thread limit: a host app or a shared machine
// may give no more threads; nnc must then run slower or say so, never std::terminate.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "compiler/support/Error.h"
#include "runtime/ThreadPool.h"

namespace nnc::runtime {
namespace {

TEST(RunEach, RunsEveryIndexOnceAndRethrowsTheFirstError) {
  std::vector<std::atomic<int>> calls(7);
  runEach(calls.size(), [&](size_t i) { calls[i].fetch_add(1); });
  for (auto &c : calls) EXPECT_EQ(c.load(), 1);
  EXPECT_THROW(runEach(3, [](size_t i) { if (i == 2) throw std::runtime_error("two"); }), std::runtime_error);
  runEach(0, [](size_t) { FAIL() << "no index to run"; });
}

// In a child that may have one process or thread in all (RLIMIT_NPROC, which root
// ignores: so the child becomes `nobody` first), runEach runs every index on the
// caller, and a pool of 3 is a UserError that names the limit.
TEST(RunEach, AtTheThreadLimitTheCallerRunsEverything) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to a user whose RLIMIT_NPROC applies";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit one{1, 1};
    if (setrlimit(RLIMIT_NPROC, &one) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    std::vector<int> calls(5, 0);
    runEach(calls.size(), [&](size_t i) { ++calls[i]; });
    for (int c : calls)
      if (c != 1) _exit(11);
    try {
      ThreadPool pool(3);
      _exit(12); // the limit did not hold: say so apart
    } catch (const UserError &e) {
      if (std::string(e.what()).find("thread limit") == std::string::npos) _exit(13);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died by signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 12) GTEST_SKIP() << "this system let `nobody` start threads past RLIMIT_NPROC 1";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: could not drop to nobody; 11: an index ran other than once; "
                                       "13: the pool's error does not name the limit";
}

} // namespace
} // namespace nnc::runtime
