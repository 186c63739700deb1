// Parser for the header dict of a .npy file. NumPy writes it with repr(), so only a
// sliver of Python literal syntax occurs:
//   dict  ::= '{' (entry (',' entry)* ','?)? '}'
//   entry ::= string ':' value
//   value ::= string | 'True' | 'False' | tuple | list
//   tuple ::= '(' (int (',' int)* ','?)? ')'      -- ints may carry Python 2's 'L'
//   list  ::= '[' ... ']'                          -- structured dtypes; kept as text
#include "runtime/io/NpyHeader.h"

#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <string_view>

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"

namespace nnc {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

class HeaderDictParser {
public:
  HeaderDictParser(const std::string& path, std::string_view text) : path_(path), text_(text) {}

  NpyHeader parse() {
    NpyHeader header;
    bool sawDescr = false, sawOrder = false, sawShape = false;
    expect('{', "'{' opening the header dict");
    while (!peekIs('}')) {
      std::string key = parseString();
      expect(':', "':' after a key");
      if (key == "descr") {
        header.descr = peekIs('[') ? parseBracketedText() : parseString();
        sawDescr = true;
      } else if (key == "fortran_order") {
        header.fortranOrder = parseBool();
        sawOrder = true;
      } else if (key == "shape") {
        header.shape = parseShape();
        sawShape = true;
      } else {
        fail(fmt::format("a key 'descr', 'fortran_order' or 'shape'"), fmt::format("key '{}'", clipped(key)));
      }
      if (!peekIs('}')) expect(',', "',' or '}' after a value");
    }
    ++pos_;
    skipSpace();
    if (pos_ != text_.size()) fail("the end of the header after '}'", describeNext());
    const char* missing = !sawDescr ? "descr" : !sawOrder ? "fortran_order" : !sawShape ? "shape" : nullptr;
    if (missing) fail(fmt::format("the key '{}'", missing), "a header without it");
    return header;
  }

private:
  [[noreturn]] void fail(const std::string& expected, const std::string& found) const {
    std::string_view shown = text_.substr(0, 200);
    while (!shown.empty() && std::strchr(" \t\r\n", shown.back())) shown.remove_suffix(1);
    throw UserError(fmt::format("{}: malformed .npy header at character {}: expected {}, found {} "
                                "(header: {}{})",
                                path_, pos_, expected, found, clipped(shown, 200), text_.size() > 200 ? "..." : ""));
  }
  std::string describeNext() const {
    if (pos_ >= text_.size()) return "the end of the header";
    return fmt::format("'{}'", clipped(text_.substr(pos_, 12)));
  }
  void skipSpace() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) && text_[pos_] != '\0') ++pos_;
  }
  bool peekIs(char c) {
    skipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c, const char* what) {
    if (!peekIs(c)) fail(what, describeNext());
    ++pos_;
  }
  std::string parseString() {
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail("a quoted string", describeNext());
    char quote = text_[pos_];
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("a closing quote", "the end of the header");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool parseBool() {
    skipSpace();
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail("True or False", describeNext());
  }
  std::string parseBracketedText() {
    size_t start = pos_;
    int depth = 0;
    for (; pos_ < text_.size(); ++pos_) {
      if (text_[pos_] == '[') ++depth;
      if (text_[pos_] == ']' && --depth == 0) return std::string(text_.substr(start, ++pos_ - start));
    }
    fail("']' closing the list", "the end of the header");
  }
  std::vector<int64_t> parseShape() {
    std::vector<int64_t> shape;
    expect('(', "'(' opening the shape tuple");
    while (!peekIs(')')) {
      shape.push_back(parseDimension());
      if (!peekIs(')')) expect(',', "',' or ')' in the shape tuple");
    }
    ++pos_;
    return shape;
  }
  int64_t parseDimension() {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '-')
      fail("a non-negative dimension in the shape", describeNext());
    if (pos_ >= text_.size() || !isDigit(text_[pos_])) fail("an integer dimension in the shape", describeNext());
    int64_t value = 0;
    size_t start = pos_;
    for (; pos_ < text_.size() && isDigit(text_[pos_]); ++pos_)
      if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, text_[pos_] - '0', &value))
        throw UserError(fmt::format("{}: .npy shape dimension {}... does not fit in 64 bits", path_,
                                    clipped(text_.substr(start, 24))));
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_; // Python 2 long
    return value;
  }
  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  const std::string& path_;
  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t readLittleEndian(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

std::string hexBytes(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}{:02x}", i ? " " : "", p[i]);
  return s;
}

} // namespace

NpyHeader parseNpyHeader(const std::string& path, const std::vector<uint8_t>& bytes) {
  const size_t size = bytes.size();
  if (size < kMagicSize && size > 0 && std::memcmp(bytes.data(), kMagic, size) == 0)
    throw UserError(fmt::format("{}: truncated .npy header: the file is {} bytes, the magic alone needs {}",
                                path, size, kMagicSize));
  if (size < kMagicSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    throw UserError(fmt::format("{}: not a .npy file: expected the magic bytes 93 4e 55 4d 50 59 "
                                "(\"\\x93NUMPY\") at the start, found {}",
                                path, size == 0 ? "an empty file" : hexBytes(bytes.data(), std::min(size, kMagicSize))));
  if (size < kMagicSize + 2)
    throw UserError(fmt::format("{}: truncated .npy header: the file is {} bytes, the version alone "
                                "needs {}", path, size, kMagicSize + 2));
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    throw UserError(fmt::format("{}: unsupported .npy format version {}.{} (accepted: 1.0, 2.0, 3.0)",
                                path, major, minor));
  const size_t lengthBytes = major == 1 ? 2 : 4;
  const size_t preamble = kMagicSize + 2 + lengthBytes;
  if (size < preamble)
    throw UserError(fmt::format("{}: truncated .npy header: the file is {} bytes, a version {}.0 "
                                "preamble needs {}", path, size, major, preamble));
  const size_t headerLength = readLittleEndian(bytes.data() + kMagicSize + 2, int(lengthBytes));
  if (headerLength > size - preamble)
    throw UserError(fmt::format("{}: .npy header length {} runs past the end of the file: the "
                                "header would end at byte {} but the file is {} bytes",
                                path, headerLength, preamble + headerLength, size));
  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + preamble, headerLength);
  NpyHeader header = HeaderDictParser(path, text).parse();
  header.dataOffset = preamble + headerLength;
  return header;
}

size_t npyDataOffset(const std::vector<uint8_t>& prefix) {
  if (prefix.size() < kMagicSize + 2 || std::memcmp(prefix.data(), kMagic, kMagicSize) != 0) return 0;
  const int major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0) return 0;
  const size_t lengthBytes = major == 1 ? 2 : 4;
  if (prefix.size() < kMagicSize + 2 + lengthBytes) return 0;
  return kMagicSize + 2 + lengthBytes + readLittleEndian(prefix.data() + kMagicSize + 2, int(lengthBytes));
}

std::string formatShape(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

std::string formatNpyPreamble(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                 descr, formatShape(shape));
  const size_t fixed = kMagicSize + 2 + 2;
  size_t total = (fixed + dict.size() + 1 + 63) / 64 * 64; // +1 for the final newline
  dict.append(total - fixed - dict.size() - 1, ' ');
  dict += '\n';
  std::string preamble(kMagic, kMagicSize);
  preamble += '\x01';
  preamble += '\x00';
  preamble += char(dict.size() & 0xff);
  preamble += char(dict.size() >> 8);
  return preamble + dict;
}

} // namespace nnc
