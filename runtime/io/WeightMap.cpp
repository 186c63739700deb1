#include "runtime/io/WeightMap.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

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
    if (!atEnd()) return fail(fmt::format("expected the end of the rule after '{}', found {}", clipped(*to), found()));
    const auto stars = [](const std::string &s) { return std::count(s.begin(), s.end(), '*'); };
    if (stars(*to) > stars(*from)) {
      pos_ = toColumn;
      return fail(fmt::format("'{}' has {} '*' but '{}' has {}: the i-th '*' of TO takes what the i-th '*' of FROM "
                              "matched, so TO may not have more",
                              clipped(*to), stars(*to), clipped(*from), stars(*from)));
    }
    return WeightMap::Rule{*from, *to, number_};
  }

private:
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

std::string WeightMap::apply(const std::string &tensorName) const {
  std::string name = tensorName;
  for (const Rule &rule : rules_) {
    auto captures = matchWeightPattern(rule.from, name);
    if (!captures) continue;
    std::string out;
    size_t star = 0;
    for (char c : rule.to) {
      if (c == '*') out += (*captures)[star++];
      else out += c;
    }
    if (out.size() > tensorName.size() + kMaxGrowthBytes)
      throw UserError(fmt::format("{}:{}: the rule '{} -> {}' makes the name of tensor '{}' {} bytes long; a weight "
                                  "map may lengthen a name by at most {} bytes",
                                  name_, rule.line, clipped(rule.from), clipped(rule.to), clipped(tensorName),
                                  withCommas(int64_t(out.size())), kMaxGrowthBytes));
    name = std::move(out);
  }
  return name;
}

} // namespace nnc::runtime
