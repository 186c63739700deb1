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
// Three forms reshape what a rule matches, for checkpoints that store a layer
// differently (GPT-2's Conv1D modules: [in, out], q|k|v joined in one tensor):
//   h.*.mlp.c_fc.weight -> h.*.mlp.up.weight transposed      # stored [in, out]
//   h.*.attn.c_attn.bias -> h.*.attn.{q,k,v}.bias            # split in 3 along axis 0
//   h.*.attn.bias -> -                                        # not a parameter: dropped
// `transposed` (after TO) swaps a 2-D tensor's axes; one `{a,b,...}` group in TO (two to
// kMaxParts names of one or more bytes other than `*`, `{`, `}`, `,`) splits the tensor along
// its first axis into that many equal parts, the i-th named with the i-th name; a TO of
// `-` drops the tensor. A tensor is transposed first, then split; later rules rename each
// part. A second split of one tensor is an error.
//
// Limits (no input can make parsing slow, memory-hungry or a message long, nor matching
// worse than linear): the file is at most 16 MiB (checked before it is read), a line at
// most 4,096 bytes, at most 1,000 rules, a group of at most kMaxParts different names,
// at most kMaxMappedNames names made of one file's tensors (WeightStore); matching a
// name is linear in its length per rule (all of a header's names under 1,000 rules: a
// 10 MB name took 9 s); a mapped name may be at most 256 bytes longer than the file's
// name (apply() throws a UserError naming the rule otherwise).
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
    bool transposed = false;
    bool drops() const { return to == "-"; }
  };
  // A name a file tensor takes: part `part` of `parts` along the first axis of the
  // tensor, transposed first when `transposed`.
  struct Mapped {
    std::string name;
    bool transposed = false;
    int64_t part = 0, parts = 1;
    bool reshaped() const { return transposed || parts > 1; }
  };
  static constexpr int64_t kMaxFileBytes = 16 << 20;
  static constexpr size_t kMaxLineBytes = 4096;
  static constexpr size_t kMaxRules = 1000;
  static constexpr size_t kMaxGrowthBytes = 256;
  static constexpr size_t kMaxErrorsShown = 20;
  static constexpr size_t kMaxParts = 16;            // names in one {a,b,...} group
  static constexpr size_t kMaxMappedNames = 4000000; // names a map makes of one file's tensors

  WeightMap() = default; // renames nothing
  // `name` stands for the file in messages.
  static WeightMap parse(std::string_view text, const std::string &name);
  static WeightMap fromFile(const std::string &path);

  // The names a file tensor takes after every rule, in order: none when a rule drops
  // it, several when one splits it; a UserError when a rule makes a name more than
  // kMaxGrowthBytes longer than `tensorName`, or splits a part again.
  std::vector<Mapped> map(const std::string &tensorName) const;
  // map()'s names joined by ", " ("" for a dropped tensor).
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
