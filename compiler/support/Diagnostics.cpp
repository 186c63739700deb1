#include "compiler/support/Diagnostics.h"

#include <algorithm>
#include <fmt/format.h>

namespace nnc {

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  lineStarts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') lineStarts_.push_back(i + 1);
}

std::string_view SourceFile::line(uint32_t n) const {
  if (n == 0 || n > lineStarts_.size()) return {};
  size_t b = lineStarts_[n - 1];
  size_t e = n < lineStarts_.size() ? lineStarts_[n] - 1 : text_.size();
  if (e > b && text_[e - 1] == '\r') --e;
  return std::string_view(text_).substr(b, e - b);
}

SourceDiagnostic &DiagnosticEngine::add(Severity s, SourceRange r, std::string msg) {
  // Cut when made, so that every form of it (text, JSON, the API's Error) is bounded.
  if (msg.size() > kMaxMessageBytes) msg = clipMessage(msg);
  // Errors and warnings are capped apart, so that many warnings never hide an error.
  const size_t count = s == Severity::Error ? ++errors_ : ++warnings_;
  lastKept_ = count <= kMaxErrors;
  if (!lastKept_) {
    dropped_ = SourceDiagnostic{s, r, std::move(msg), {}};
    return dropped_;
  }
  diags_.push_back(SourceDiagnostic{s, r, std::move(msg), {}});
  return diags_.back();
}

SourceDiagnostic &DiagnosticEngine::error(SourceRange r, std::string msg) {
  return add(Severity::Error, r, std::move(msg));
}
SourceDiagnostic &DiagnosticEngine::warning(SourceRange r, std::string msg) {
  return add(Severity::Warning, r, std::move(msg));
}
void DiagnosticEngine::note(SourceRange r, std::string msg) {
  if (diags_.empty() || !lastKept_) return; // a dropped diagnostic's notes go with it
  diags_.back().notes.push_back({r, msg.size() > kMaxMessageBytes ? clipMessage(msg) : std::move(msg)});
}

namespace {
// Printable form of a source line: control bytes and non-UTF-8 garbage become '?',
// so binary input cannot corrupt the terminal.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += (c == '\t' || (c >= 0x20 && c < 0x7f)) ? char(c) : '?';
  return out;
}

void renderOne(std::string &out, const SourceFile *file, Severity sev, SourceRange r,
               const std::string &msg, bool color) {
  const char *label = sev == Severity::Error ? "error" : sev == Severity::Warning ? "warning" : "note";
  const char *tint = sev == Severity::Error ? "\033[1;31m" : sev == Severity::Warning ? "\033[1;35m" : "\033[1;36m";
  std::string where = file ? file->path() : std::string("nnc");
  if (r.begin.valid()) where += fmt::format(":{}:{}", r.begin.line, r.begin.col);
  if (color)
    out += fmt::format("\033[1m{}:\033[0m {}{}:\033[0m \033[1m{}\033[0m\n", where, tint, label, msg); // cut in add
  else
    out += fmt::format("{}: {}: {}\n", where, label, msg);
  if (!file || !r.begin.valid() || r.begin.line > file->lineCount()) return;
  // A line longer than kWidth is shown as a window of kWidth bytes around the column
  // ("..." where it is cut), so that the caret stays under the mistake.
  constexpr size_t kWidth = 200;
  std::string_view line = file->line(r.begin.line);
  const size_t col = r.begin.col - 1; // 0-based
  const size_t from = line.size() <= kWidth || col < kWidth * 3 / 4 ? 0 : std::min(col - kWidth / 2, line.size() - kWidth);
  const std::string prefix = from ? "..." : "";
  std::string text = prefix + printable(line.substr(from, kWidth));
  if (from + kWidth < line.size()) text += "...";
  out += fmt::format("{:>5} | {}\n", r.begin.line, text);
  auto shown = [&](uint32_t c) { return uint32_t(int64_t(c) - int64_t(from) + int64_t(prefix.size())); };
  uint32_t startCol = std::min<uint32_t>(shown(r.begin.col), uint32_t(text.size()) + 1);
  uint32_t endCol = (r.end.valid() && r.end.line == r.begin.line && r.end.col >= r.begin.col)
                        ? std::min<uint32_t>(shown(r.end.col), uint32_t(text.size()))
                        : startCol;
  std::string marker(startCol > 0 ? startCol - 1 : 0, ' ');
  for (size_t i = 0; i < marker.size() && i < text.size(); ++i)
    if (text[i] == '\t') marker[i] = '\t';
  marker += '^';
  if (endCol > startCol) marker += std::string(endCol - startCol, '~');
  out += fmt::format("      | {}{}{}\n", color ? tint : "", marker, color ? "\033[0m" : "");
}
} // namespace

std::string DiagnosticEngine::render(const SourceDiagnostic &d, bool color) const {
  std::string out;
  renderOne(out, file_, d.severity, d.range, d.message, color);
  for (const auto &n : d.notes) renderOne(out, file_, Severity::Note, n.range, n.message, color);
  return out;
}

std::string DiagnosticEngine::render(bool color) const {
  std::string out;
  for (const auto &d : diags_) out += render(d, color);
  if (errors_ > kMaxErrors)
    out += fmt::format("nnc: {} more errors not shown\n", errors_ - kMaxErrors);
  if (warnings_ > kMaxErrors)
    out += fmt::format("nnc: {} more warnings not shown\n", warnings_ - kMaxErrors);
  return out;
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps
// of neighbours ("desne" is one edit from "dense"), ignoring case.
static size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  auto eq = [](char x, char y) { return std::tolower(x) == std::tolower(y); };
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (eq(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && eq(a[i - 1], b[j - 2]) && eq(a[i - 2], b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string closestMatch(std::string_view word, const std::vector<std::string> &candidates) {
  // Accept roughly one edit in three characters (at least one, at most three); long
  // inputs are not typos of short names (and are not compared: the distance is
  // quadratic in the lengths).
  if (word.size() > 64) return {};
  std::string best;
  size_t bestDist = SIZE_MAX;
  for (const auto &c : candidates) {
    if (c.size() > word.size() + 3 || word.size() > c.size() + 3) continue; // more than 3 edits apart
    size_t d = editDistance(word, c);
    if (d < bestDist) bestDist = d, best = c;
  }
  size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  return bestDist <= limit ? best : std::string();
}

namespace {
// The length of `text`'s first `max` bytes cut back to a UTF-8 character boundary.
size_t utf8Cut(std::string_view text, size_t max) {
  size_t cut = std::min(max, text.size());
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}
} // namespace

std::string clipped(std::string_view text, size_t maxBytes) {
  const size_t keep = text.size() > maxBytes ? utf8Cut(text, maxBytes) : text.size();
  std::string out;
  out.reserve(keep + 32);
  for (size_t i = 0; i < keep; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out += (c < 0x20 || c == 0x7f) ? '?' : char(c);
      continue;
    }
    // A UTF-8 character stays whole; a byte that starts none is written as \xNN.
    const size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool whole = n > 0 && i + n <= keep;
    for (size_t j = 1; whole && j < n; ++j) whole = (static_cast<unsigned char>(text[i + j]) & 0xC0) == 0x80;
    if (!whole) {
      out += fmt::format("\\x{:02x}", c);
      continue;
    }
    out.append(text.substr(i, n));
    i += n - 1;
  }
  if (keep < text.size()) out += fmt::format("... ({} bytes)", withCommas(int64_t(text.size())));
  return out;
}

std::string clipMessage(std::string_view message, size_t maxBytes) {
  if (message.size() <= maxBytes) return std::string(message);
  // The mark counts in maxBytes: the whole message is at most that long.
  const std::string mark = fmt::format("... (message cut: {} bytes in all)", withCommas(int64_t(message.size())));
  const size_t keep = maxBytes > mark.size() ? maxBytes - mark.size() : 0;
  return std::string(message.substr(0, utf8Cut(message, keep))) + mark;
}

std::string counted(int64_t n, std::string_view one, std::string_view many) {
  return withCommas(n) + " " + std::string(n == 1 ? one : many);
}

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -(n + 1) + uint64_t(1) : uint64_t(n));
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count && count % 3 == 0) out += ',';
    out += *it;
    ++count;
  }
  if (n < 0) out += '-';
  return std::string(out.rbegin(), out.rend());
}

std::string withCommas1(double x) {
  int64_t tenths = int64_t(x * 10 + 0.5);
  return fmt::format("{}.{}", withCommas(tenths / 10), tenths % 10);
}

} // namespace nnc
