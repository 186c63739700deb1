// Running the built `nnc` from the CLI tests: stdout and stderr captured apart, under
// `timeout` so a hang fails the test instead of stalling the suite, and a death by
// signal reported as such (exit codes alone cannot tell a crash from a clean error).
#pragma once
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "ScopedEnv.h"

namespace nnc_cli_test {

struct Result {
  int exitCode = -1;   // nnc's exit code; -1 when it did not exit normally
  int signal = 0;      // the signal that ended nnc, if one did
  bool timedOut = false;
  std::string out, err;
  double seconds = 0;

  // Did nnc finish on its own with a clean exit (no signal, no timeout, not exit 3)?
  bool clean() const { return !timedOut && signal == 0 && exitCode >= 0 && exitCode != 3; }
  std::string describe() const {
    std::string s = timedOut ? "timed out" : signal ? "killed by signal " + std::to_string(signal)
                                                    : "exit " + std::to_string(exitCode);
    return s + " after " + std::to_string(seconds) + " s\n--- stderr:\n" + err.substr(0, 4000) +
           "\n--- stdout:\n" + out.substr(0, 2000);
  }
};

// How much slower than a Release build the binary under test runs: NNC_TEST_TIME_SCALE
// (tools/asan.sh sets 4: instrumented code on a machine running two tests at once);
// every time limit of these tests is multiplied by it. 1 when unset.
inline double timeScale() {
  const char *v = std::getenv("NNC_TEST_TIME_SCALE");
  double x = v ? std::atof(v) : 1.0;
  return x >= 1.0 ? x : 1.0;
}

// Runs `timeout -s KILL SECONDS nnc ARGS...` in CWD (the source tree by default);
// SECONDS is scaled by timeScale().
inline Result runNnc(const std::vector<std::string> &args, int seconds = 20,
                     const std::string &cwd = NNC_SOURCE_DIR) {
  std::vector<std::string> argv = {"timeout", "-s", "KILL", std::to_string(int(seconds * timeScale())), NNC_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  int outPipe[2], errPipe[2];
  Result r;
  if (pipe(outPipe) != 0 || pipe(errPipe) != 0) return r;
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(outPipe[1], 1);
    dup2(errPipe[1], 2);
    close(outPipe[0]), close(outPipe[1]), close(errPipe[0]), close(errPipe[1]);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    setenv("NO_COLOR", "1", 1);
    std::vector<char *> cargv;
    for (auto &a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execvp("timeout", cargv.data());
    _exit(127);
  }
  close(outPipe[1]), close(errPipe[1]);
  pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (auto &fd : fds) {
      if (fd.fd < 0 || !(fd.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fd.fd, buf, sizeof buf);
      if (n <= 0) {
        close(fd.fd);
        fd.fd = -1;
        --open;
        continue;
      }
      (fd.fd == outPipe[0] ? r.out : r.err).append(buf, size_t(n));
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    // timeout(1): 137 = its KILL after the limit; 128+n = the command died of signal n.
    if (code == 137 || code == 124) r.timedOut = true;
    else if (code > 128) r.signal = code - 128;
    else r.exitCode = code;
  }
  return r;
}

// A fresh directory for files a test generates; removed with the object.
// A version 1.0 .npy of integers ('<i4' or '<i8'), as bytes.
inline std::string npyIntegers(const std::vector<int64_t> &shape, const std::vector<int64_t> &values,
                               const char *descr = "<i4") {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  const size_t width = descr[2] == '4' ? 4 : 8;
  for (int64_t v : values) {
    char buf[8];
    std::memcpy(buf, &v, 8); // little-endian host: the low 4 bytes are the int32
    bytes.append(buf, width);
  }
  return bytes;
}

class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nnc_cli_XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  // Writes BYTES to NAME in the directory and returns the file's path.
  std::string write(const std::string &name, const std::string &bytes) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

private:
  std::string path_;
};

using nnc::test::ScopedEnv;

// A cache directory of the test's own, in a fresh temporary directory.
struct TempCache {
  TempDir dir;
  std::string path = std::filesystem::path(dir.write("placeholder", "")).parent_path().string() + "/kernels";
};

// The kernel cache on, in a directory of the test's own. Also what nnc runs that a test
// compares bit for bit need, for they must run one kernel row. Under the suite's
// NNC_CACHE=off each process calibrates its own, and where two rows tie (Zen 4:
// JitEngine.h, kNarrowerRowMargin) a busy machine can choose differently from run to run,
// which moves the last bits of the results. A cache directory the compared runs share
// makes the later runs read the first one's choice, as a user's runs do.
struct SharedKernelCache {
  TempCache cache;
  ScopedEnv on{"NNC_CACHE", std::nullopt}, dir{"NNC_CACHE_DIR", cache.path};
};

} // namespace nnc_cli_test
