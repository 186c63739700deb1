// Source-located diagnostics (LANGUAGE.md §4): file:line:col, the source line with a
// caret under the range, what was expected and what was found. The engine collects
// several independent errors so one run reports them all.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nnc {

struct SourceLoc {
  uint32_t line = 0; // 1-based; 0 means "no position"
  uint32_t col = 0;  // 1-based, in bytes
  bool valid() const { return line != 0; }
};

struct SourceRange {
  SourceLoc begin;
  SourceLoc end; // inclusive last column on begin's line, or invalid
};

class SourceFile {
public:
  SourceFile(std::string path, std::string text);
  const std::string &path() const { return path_; }
  const std::string &text() const { return text_; }
  std::string_view line(uint32_t n) const; // 1-based, without the newline
  uint32_t lineCount() const { return uint32_t(lineStarts_.size()); }

private:
  std::string path_, text_;
  std::vector<size_t> lineStarts_;
};

enum class Severity { Error, Warning, Note };

struct SourceDiagnostic {
  Severity severity;
  SourceRange range;
  std::string message;
  struct Note {
    SourceRange range;
    std::string message;
  };
  std::vector<Note> notes;
};

class DiagnosticEngine {
public:
  explicit DiagnosticEngine(const SourceFile *file = nullptr) : file_(file) {}
  void setFile(const SourceFile *file) { file_ = file; }
  const SourceFile *file() const { return file_; }

  SourceDiagnostic &error(SourceRange r, std::string msg);
  SourceDiagnostic &warning(SourceRange r, std::string msg);
  // Adds a note (another location, or a hint) to the most recent diagnostic.
  void note(SourceRange r, std::string msg);

  size_t errorCount() const { return errors_; }
  size_t warningCount() const { return warnings_; }
  bool hasErrors() const { return errors_ != 0; }
  const std::vector<SourceDiagnostic> &diagnostics() const { return diags_; }

  // Renders every diagnostic; `color` adds ANSI colours (terminals only).
  std::string render(bool color = false) const;
  std::string render(const SourceDiagnostic &d, bool color = false) const;

  // After this many errors (warnings) further ones are counted but not kept, nor their notes.
  static constexpr size_t kMaxErrors = 50;

private:
  SourceDiagnostic &add(Severity s, SourceRange r, std::string msg);
  const SourceFile *file_;
  std::vector<SourceDiagnostic> diags_;
  size_t errors_ = 0, warnings_ = 0;
  bool lastKept_ = true; // whether note() has a diagnostic to go with
  SourceDiagnostic dropped_{};
};

// The candidate closest to `word` by edit distance, if it is close enough to be a
// plausible typo; empty otherwise.
std::string closestMatch(std::string_view word, const std::vector<std::string> &candidates);

// Text from a user's file made safe to echo in a message: control bytes become '?',
// bytes that are not UTF-8 become \xNN, and anything longer than `maxBytes` is cut (at
// a UTF-8 boundary) and marked with "... (N bytes)", so no input, however large, is
// ever echoed whole.
std::string clipped(std::string_view text, size_t maxBytes = 80);

// The longest message (bytes) an error or diagnostic is printed with; longer ones are
// cut by clipMessage (which keeps newlines, unlike clipped).
inline constexpr size_t kMaxMessageBytes = 4096;
std::string clipMessage(std::string_view message, size_t maxBytes = kMaxMessageBytes);

// "1,234,567": the grouping every report and message uses.
std::string withCommas(int64_t n);
// "1,365.3": a non-negative number to one decimal, grouped the same way.
std::string withCommas1(double x);
// "1 token", "64 tokens": n (grouped) and the noun that agrees with it.
std::string counted(int64_t n, std::string_view one, std::string_view many);

} // namespace nnc
