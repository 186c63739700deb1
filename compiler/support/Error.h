// Errors that leave the compiler as exceptions. Each maps to one exit code of the
// command-line contract (docs/cli.md, exit codes): a problem in the user's program or files (1),
// bad usage (2). Anything else reaching main is an internal error (3).
#pragma once
#include <stdexcept>
#include <string>

namespace nnc {

// A problem in the user's program, input or weight files. The message is complete:
// it names the file and says what was expected and what was found, in the model's
// terms; libraries never mention command-line flags. The topic lets a front end (the
// CLI) add its own hint, e.g. which flag changes the batch.
class UserError : public std::runtime_error {
public:
  // Memory: a run's memory bill over its limit; DecoderMemory: a decoder's, whose KV
  // cache the context length sizes.
  enum class Topic { General, StorageDType, ActivationMemory, Memory, DecoderMemory };
  explicit UserError(const std::string &message, Topic topic = Topic::General)
      : std::runtime_error(message), topic_(topic) {}
  Topic topic() const { return topic_; }

private:
  Topic topic_;
};

// A command line that does not follow the contract.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace nnc
