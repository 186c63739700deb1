// A weight map (`--weight-map FILE`, docs/cli.md): rules that rename the tensors of a
// weights file before they are matched to the model's parameter names.
//
//   # LlamaForCausalLM -> the .nn's names
//   model.* -> *
//   *.q_proj.weight -> *.q.weight
//
// One rule per line, `FROM -> TO`; `#` starts a comment; blank lines are skipped. A
// pattern is one or more bytes other than whitespace, `#` and the pair `->`; control
// bytes are refused. `*` in FROM matches one or more characters, and a rule must match
// the whole name. When FROM has several `*`, each one, from left to right, takes the
// shortest text that lets the rest of FROM still match ("leftmost-shortest":
// `*.*` on `a.b.c` gives `a` and `b.c`). The i-th `*` of TO is replaced by what the
// i-th `*` of FROM matched; TO may have fewer `*` than FROM, never more. Every rule is
// applied in order, each to the result of the ones before (like a sed script); a name
// no rule matches stays as it is.
//
// Limits (no input can make parsing or matching slow, memory-hungry or a message
// long): the file is at most 16 MiB (checked before it is read), a line at most 4,096
// bytes, at most 1,000 rules; matching a name is linear in its length per rule; a
// mapped name may be at most 256 bytes longer than the file's name (apply() throws a
// UserError naming the rule otherwise).
// Parse errors are a UserError with one line per problem, `FILE:LINE:COL: what was
// expected, found what` (up to 20, the rest counted), quoting at most 80 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nnc::runtime {

class WeightMap {
public:
  struct Rule {
    std::string from, to;
    int line = 0; // 1-based, in the map's file
  };
  static constexpr int64_t kMaxFileBytes = 16 << 20;
  static constexpr size_t kMaxLineBytes = 4096;
  static constexpr size_t kMaxRules = 1000;
  static constexpr size_t kMaxGrowthBytes = 256;
  static constexpr size_t kMaxErrorsShown = 20;

  WeightMap() = default; // renames nothing
  // `name` stands for the file in messages.
  static WeightMap parse(std::string_view text, const std::string &name);
  static WeightMap fromFile(const std::string &path);

  // The name after every rule, in order; a UserError when a rule makes it more than
  // kMaxGrowthBytes longer than `tensorName`.
  std::string apply(const std::string &tensorName) const;
  const std::vector<Rule> &rules() const { return rules_; }
  const std::string &name() const { return name_; }
  bool empty() const { return rules_.empty(); }

private:
  std::vector<Rule> rules_;
  std::string name_;
};

// What each `*` of `pattern` matched in `name` (leftmost-shortest, as above), or
// nullopt when the pattern does not match the whole name.
std::optional<std::vector<std::string_view>> matchWeightPattern(std::string_view pattern, std::string_view name);

} // namespace nnc::runtime
