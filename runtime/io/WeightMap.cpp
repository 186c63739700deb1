#include "runtime/io/WeightMap.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/io/FileBytes.h"

namespace nnc::runtime {

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }
bool isControl(char c) { return (unsigned char)c < 0x20 || c == 0x7f; }
bool arrowAt(std::string_view line, size_t i) { return i + 1 < line.size() && line[i] == '-' && line[i + 1] == '>'; }

// One line of the map, read left to right; errors are "FILE:LINE:COL: message".
class LineParser {
public:
  LineParser(std::string_view line, const std::string &file, int number, std::vector<std::string> &errors)
      : line_(line), file_(file), number_(number), errors_(errors) {}

  // A rule, nullopt for a blank or comment line or after an error (recorded).
  std::optional<WeightMap::Rule> parse() {
    skipSpace();
    if (atEnd()) return std::nullopt;
    if (arrowAt(line_, pos_)) return fail("expected a name pattern before '->' (rules are 'FROM -> TO')");
    auto from = pattern();
    if (!from) return std::nullopt;
    skipSpace();
    if (!arrowAt(line_, pos_))
      return fail(fmt::format("expected '->' after '{}', found {}", clipped(*from), found()));
    pos_ += 2;
    skipSpace();
    const size_t toColumn = pos_;
    if (atEnd() || arrowAt(line_, pos_))
      return fail(fmt::format("expected a name pattern after '{} ->', found {}", clipped(*from), found()));
    auto to = pattern();
    if (!to) return std::nullopt;
    skipSpace();
    bool transposed = false;
    if (!atEnd()) {
      const size_t wordColumn = pos_;
      auto word = pattern();
      if (!word) return std::nullopt;
      if (*word != "transposed") {
        pos_ = wordColumn;
        return fail(fmt::format("expected 'transposed' or the end of the rule after '{}', found {}", clipped(*to), found()));
      }
      transposed = true;
      skipSpace();
      if (!atEnd()) return fail(fmt::format("expected the end of the rule after 'transposed', found {}", found()));
    }
    if (*to == "-" && transposed) {
      pos_ = toColumn;
      return fail("a rule whose TO is '-' drops the tensor; expected no 'transposed' after it");
    }
    if (std::string why = splitProblem(*to); !why.empty()) {
      pos_ = toColumn + to->find_first_of("{},");
      return fail(fmt::format("in '{}': {}", clipped(*to), why));
    }
    const auto stars = [](const std::string &s) { return std::count(s.begin(), s.end(), '*'); };
    if (stars(*to) > stars(*from)) {
      pos_ = toColumn;
      return fail(fmt::format("'{}' has {} '*' but '{}' has {}: the i-th '*' of TO takes what the i-th '*' of FROM "
                              "matched, so TO may not have more",
                              clipped(*to), stars(*to), clipped(*from), stars(*from)));
    }
    return WeightMap::Rule{*from, *to, number_, transposed};
  }

private:
  // What is wrong with TO's `{a,b,...}` group, or "" (also with none).
  static std::string splitProblem(const std::string &to) {
    const size_t open = to.find('{'), close = to.find('}');
    if (open == std::string::npos && close == std::string::npos) {
      if (to.find(',') == std::string::npos) return "";
      return "',' stands only between the names of a '{a,b}' group";
    }
    if (open == std::string::npos || close == std::string::npos || close < open)
      return "expected a group '{a,b,...}' with both braces";
    if (to.find_first_of("{}", close + 1) != std::string::npos || to.find('{', open + 1) < close)
      return "expected one '{a,b,...}' group (a tensor is split once)";
    if (to.find(',', close) != std::string::npos || to.substr(0, open).find(',') != std::string::npos)
      return "',' stands only between the names of a '{a,b}' group";
    const std::string inside = to.substr(open + 1, close - open - 1);
    if (inside.find('*') != std::string::npos) return "a '{a,b}' group holds names, not '*'";
    size_t names = 1;
    std::set<std::string_view> seen;
    for (size_t at = 0, comma; (comma = inside.find(',', at)) != std::string::npos || at <= inside.size(); at = comma + 1) {
      const size_t end = comma == std::string::npos ? inside.size() : comma;
      if (end == at) return "expected a name between the commas and braces of '{a,b,...}', found none";
      if (const std::string_view name = std::string_view(inside).substr(at, end - at); !seen.insert(name).second)
        return fmt::format("expected different names in '{{a,b,...}}' (one per part), found '{}' twice", clipped(std::string(name)));
      if (comma == std::string::npos) break;
      ++names;
    }
    if (names < 2) return "expected two or more names in '{a,b,...}' (it splits the tensor into that many parts)";
    if (names > WeightMap::kMaxParts)
      return fmt::format("expected at most {} names in '{{a,b,...}}', found {}", WeightMap::kMaxParts, names);
    return "";
  }
  bool atEnd() const { return pos_ >= line_.size() || line_[pos_] == '#'; }
  void skipSpace() {
    while (pos_ < line_.size() && isSpace(line_[pos_])) ++pos_;
  }
  // The bytes up to whitespace, '#' or '->'; a control byte is an error.
  std::optional<std::string> pattern() {
    const size_t start = pos_;
    for (; pos_ < line_.size() && !isSpace(line_[pos_]) && line_[pos_] != '#' && !arrowAt(line_, pos_); ++pos_)
      if (isControl(line_[pos_])) {
        fail(fmt::format("unexpected byte '\\x{:02x}' (a name pattern holds no control characters)",
                         (unsigned char)line_[pos_]));
        return std::nullopt;
      }
    return std::string(line_.substr(start, pos_ - start));
  }
  // What stands at pos_, for "found ...".
  std::string found() const {
    if (pos_ >= line_.size()) return "the end of the line";
    if (line_[pos_] == '#') return "a comment";
    if (arrowAt(line_, pos_)) return "'->'";
    size_t end = pos_;
    while (end < line_.size() && !isSpace(line_[end]) && line_[end] != '#' && !arrowAt(line_, end)) ++end;
    return fmt::format("'{}'", clipped(line_.substr(pos_, std::max<size_t>(end - pos_, 1))));
  }
  std::nullopt_t fail(const std::string &message) {
    errors_.push_back(fmt::format("{}:{}:{}: {}", file_, number_, pos_ + 1, message));
    return std::nullopt;
  }

  std::string_view line_;
  const std::string &file_;
  int number_;
  std::vector<std::string> &errors_;
  size_t pos_ = 0;
};

// The first place at or after `from` where `needle` occurs in `hay`, in time linear in
// their sizes (string_view::find can take |hay| x |needle| on "aaa...a" and "aa...ab").
size_t findFrom(std::string_view hay, std::string_view needle, size_t from) {
  if (from > hay.size()) return std::string_view::npos;
  if (needle.size() < 2 || hay.size() - from < 1024) return hay.find(needle, from);
  auto it = std::search(hay.begin() + from, hay.end(), std::boyer_moore_searcher(needle.begin(), needle.end()));
  return it == hay.end() ? std::string_view::npos : size_t(it - hay.begin());
}

} // namespace

WeightMap WeightMap::parse(std::string_view text, const std::string &name) {
  WeightMap map;
  map.name_ = name;
  std::vector<std::string> errors;
  size_t errorCount = 0;
  int number = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3); // a UTF-8 byte-order mark
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    std::vector<std::string> lineErrors;
    if (line.size() > kMaxLineBytes) {
      lineErrors.push_back(fmt::format("{}:{}:{}: expected a line of at most {} bytes, found {} bytes", name, number,
                                       kMaxLineBytes + 1, withCommas(int64_t(kMaxLineBytes)),
                                       withCommas(int64_t(line.size()))));
    } else if (auto rule = LineParser(line, name, number, lineErrors).parse()) {
      if (map.rules_.size() == kMaxRules) {
        errors.push_back(fmt::format("{}:{}:1: expected at most {} rules, found more", name, number,
                                     withCommas(int64_t(kMaxRules))));
        ++errorCount;
        break;
      }
      map.rules_.push_back(std::move(*rule));
    }
    errorCount += lineErrors.size();
    for (auto &e : lineErrors)
      if (errors.size() < kMaxErrorsShown) errors.push_back(std::move(e));
  }
  if (errorCount) {
    std::string message = fmt::format("{}: {} error{} in the weight map:", name, errorCount, errorCount == 1 ? "" : "s");
    for (const auto &e : errors) message += "\n  " + e;
    if (errorCount > errors.size()) message += fmt::format("\n  ... and {} more", errorCount - errors.size());
    throw UserError(message);
  }
  return map;
}

WeightMap WeightMap::fromFile(const std::string &path) {
  ReadableFile file(path, "weight map");
  if (file.size() && *file.size() > kMaxFileBytes)
    throw UserError(fmt::format("{}: the weight map has {} bytes; expected at most {} (a rule per line)", path,
                                withCommas(*file.size()), withCommas(kMaxFileBytes)));
  std::vector<uint8_t> bytes;
  if (file.readInto(bytes, size_t(kMaxFileBytes) + 1) > size_t(kMaxFileBytes))
    throw UserError(fmt::format("{}: the weight map has more than {} bytes (a rule per line)", path,
                                withCommas(kMaxFileBytes)));
  return parse(std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()), path);
}

std::optional<std::vector<std::string_view>> matchWeightPattern(std::string_view pattern, std::string_view name) {
  // pattern = seg[0] * seg[1] * ... * seg[k]. seg[0] is a prefix and seg[k] a suffix of
  // the name; each middle segment is taken at its earliest place after at least one
  // character: that is the shortest text for the '*' before it, and it leaves the
  // most room for the rest, so if any match exists this one does.
  std::vector<std::string_view> segs;
  for (size_t start = 0;;) {
    size_t star = pattern.find('*', start);
    segs.push_back(pattern.substr(start, star == std::string_view::npos ? std::string_view::npos : star - start));
    if (star == std::string_view::npos) break;
    start = star + 1;
  }
  const size_t stars = segs.size() - 1;
  if (stars == 0) {
    if (pattern != name) return std::nullopt;
    return std::vector<std::string_view>{};
  }
  const std::string_view first = segs.front(), last = segs.back();
  if (name.size() < first.size() + last.size() + stars || name.substr(0, first.size()) != first ||
      name.substr(name.size() - last.size()) != last)
    return std::nullopt;
  const size_t end = name.size() - last.size(); // the last '*' ends here
  const std::string_view body = name.substr(0, end);
  std::vector<std::string_view> captures;
  size_t pos = first.size();
  for (size_t i = 1; i < stars; ++i) {
    size_t at = findFrom(body, segs[i], pos + 1);
    if (at == std::string_view::npos) return std::nullopt;
    captures.push_back(name.substr(pos, at - pos));
    pos = at + segs[i].size();
  }
  if (end <= pos) return std::nullopt; // the last '*' needs a character
  captures.push_back(name.substr(pos, end - pos));
  return captures;
}

std::vector<WeightMap::Mapped> WeightMap::map(const std::string &tensorName) const {
  std::vector<Mapped> names{Mapped{tensorName}};
  for (const Rule &rule : rules_) {
    std::vector<Mapped> next;
    for (Mapped &m : names) {
      auto captures = matchWeightPattern(rule.from, m.name);
      if (!captures) {
        next.push_back(std::move(m));
        continue;
      }
      if (rule.drops()) continue;
      const auto failRule = [&](const std::string &what) {
        return UserError(fmt::format("{}:{}: the rule '{} -> {}{}' {}", name_, rule.line, clipped(rule.from),
                                     clipped(rule.to), rule.transposed ? " transposed" : "", what));
      };
      if (rule.transposed && m.parts > 1)
        throw failRule(fmt::format("transposes '{}', a part of a split tensor; a tensor is transposed before it is "
                                   "split (in the rule that splits it, or an earlier one)",
                                   clipped(m.name)));
      // TO with its '*' replaced, around the {a,b,...} group when it has one.
      const size_t open = rule.to.find('{'), close = open == std::string::npos ? open : rule.to.find('}', open);
      size_t star = 0;
      const auto substituted = [&](std::string_view part) {
        std::string out;
        for (char c : part) {
          if (c == '*') out += (*captures)[star++];
          else out += c;
        }
        return out;
      };
      const std::string before = substituted(std::string_view(rule.to).substr(0, open));
      const std::string after = open == std::string::npos ? "" : substituted(std::string_view(rule.to).substr(close + 1));
      std::vector<std::string> alternatives{""};
      if (open != std::string::npos) {
        if (m.parts > 1) throw failRule(fmt::format("splits '{}' again; a tensor is split once", clipped(m.name)));
        alternatives.clear();
        const std::string inside = rule.to.substr(open + 1, close - open - 1);
        for (size_t at = 0;;) {
          const size_t comma = inside.find(',', at);
          alternatives.push_back(inside.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
          if (comma == std::string::npos) break;
          at = comma + 1;
        }
      }
      for (size_t i = 0; i < alternatives.size(); ++i) {
        std::string out = before + alternatives[i] + after;
        if (out.size() > tensorName.size() + kMaxGrowthBytes)
          throw failRule(fmt::format("makes the name of tensor '{}' {} bytes long; a weight map may lengthen a name by "
                                     "at most {} bytes",
                                     clipped(tensorName), withCommas(int64_t(out.size())), kMaxGrowthBytes));
        Mapped part{std::move(out), m.transposed != rule.transposed, m.part, m.parts};
        if (alternatives.size() > 1) part.part = int64_t(i), part.parts = int64_t(alternatives.size());
        next.push_back(std::move(part));
      }
    }
    names = std::move(next);
  }
  return names;
}

std::string WeightMap::apply(const std::string &tensorName) const {
  std::string joined;
  for (const Mapped &m : map(tensorName)) joined += (joined.empty() ? "" : ", ") + m.name;
  return joined;
}

} // namespace nnc::runtime
