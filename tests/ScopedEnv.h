// Sets (or unsets, with nullopt) an environment variable for one scope and restores it
// after; child processes (the CLI tests' nnc) inherit it. Shared by the test stages.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace nnc::test {

class ScopedEnv {
public:
  ScopedEnv(const char *name, std::optional<std::string> value) : name_(name) {
    if (const char *old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
  std::optional<std::string> old_;
};

} // namespace nnc::test
