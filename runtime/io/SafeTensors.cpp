// Reading and validating .safetensors files; see SafeTensors.h for the format.
#include "runtime/io/SafeTensors.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Error.h"
#include "runtime/io/FileBytes.h"
#include "runtime/io/HalfFloat.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "nnc's file readers assume a little-endian host");

namespace nnc {

namespace {

using json = nlohmann::json;

// The format's own limit on the header (the reference implementation refuses larger).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct SafeTensorsDType {
  const char* name;
  int bytes;
  std::optional<DType> floatDType;
};
// Every dtype the safetensors format defines with a whole number of bytes.
constexpr SafeTensorsDType kDTypes[] = {
    {"F32", 4, DType::F32}, {"F16", 2, DType::F16},       {"BF16", 2, DType::BF16},
    {"F64", 8, {}},         {"I64", 8, {}},               {"I32", 4, {}},
    {"I16", 2, {}},         {"I8", 1, {}},                {"U64", 8, {}},
    {"U32", 4, {}},         {"U16", 2, {}},               {"U8", 1, {}},
    {"BOOL", 1, {}},        {"F8_E4M3", 1, {}},           {"F8_E5M2", 1, {}}};

// Reports problems in one file, naming it (and the tensor, once known).
struct Complainer {
  const std::string& path;
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(fmt::format("{}: {}", path, what));
  }
  [[noreturn]] void failTensor(const std::string& tensor, const std::string& what) const {
    throw UserError(fmt::format("{}: tensor '{}': {}", path, clipped(tensor), what));
  }
};

// A JSON value that must be an integer in [0, 2^63).
std::optional<int64_t> nonNegativeInt64(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u <= uint64_t(INT64_MAX)) return int64_t(u);
  }
  return std::nullopt;
}

// Appends `v` as JSON to `out`, stopping once `out` is longer than `limit`: a value
// from the file is never serialised whole (it may be 100 MB, or nested deep).
void appendJson(std::string& out, const json& v, size_t limit) {
  auto appendString = [&](const std::string& text) {
    // Cut first; an invalid UTF-8 sequence (also one the cut made) is shown as U+FFFD.
    out += json(text.substr(0, limit)).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  if (out.size() > limit) return;
  switch (v.type()) {
  case json::value_t::object: {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it, first = false) {
      if (!first) out += ',';
      appendString(it.key());
      out += ':';
      appendJson(out, it.value(), limit);
    }
    out += '}';
    break;
  }
  case json::value_t::array: {
    out += '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it, first = false) {
      if (!first) out += ',';
      appendJson(out, *it, limit);
    }
    out += ']';
    break;
  }
  case json::value_t::string: appendString(v.get_ref<const std::string&>()); break;
  default: out += v.dump(); break; // a number, true, false or null: short
  }
}

// At most 60 characters of `v` as JSON, for messages.
std::string jsonText(const json& v) {
  std::string s;
  appendJson(s, v, 60);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::vector<int64_t> parseShape(const Complainer& c, const std::string& name, const json& shape) {
  if (!shape.is_array()) c.failTensor(name, fmt::format("\"shape\" must be an array of integers, found {}", jsonText(shape)));
  std::vector<int64_t> dims;
  for (const json& d : shape) {
    if (d.is_number_integer() && d.get<int64_t>() < 0 && !d.is_number_unsigned())
      c.failTensor(name, fmt::format("shape {} has a negative dimension {}", jsonText(shape), d.get<int64_t>()));
    std::optional<int64_t> dim = nonNegativeInt64(d);
    if (!dim && (d.is_number_unsigned() || (d.is_number_float() && d.get<double>() >= 0x1p63)))
      c.failTensor(name, fmt::format("shape dimension {} does not fit in 64 bits", jsonText(d)));
    if (!dim) c.failTensor(name, fmt::format("\"shape\" must hold integers, found {} in {}", jsonText(d), jsonText(shape)));
    dims.push_back(*dim);
  }
  return dims;
}

TensorInfo parseTensorEntry(const Complainer& c, const std::string& name, const json& entry, int64_t bufferBytes) {
  if (!entry.is_object())
    c.failTensor(name, fmt::format("expected an object with \"dtype\", \"shape\", \"data_offsets\", found {}",
                                   jsonText(entry)));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) c.failTensor(name, fmt::format("the entry has no \"{}\"", key));
  for (const auto& field : entry.items())
    if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets")
      c.failTensor(name, fmt::format("unexpected field \"{}\" (expected dtype, shape, data_offsets)",
                                     clipped(field.key())));

  TensorInfo info;
  info.name = name;
  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) c.failTensor(name, fmt::format("\"dtype\" must be a string, found {}", jsonText(dtype)));
  info.dtype = dtype.get<std::string>();
  auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const SafeTensorsDType& t) { return info.dtype == t.name; });
  if (known == std::end(kDTypes)) {
    std::vector<const char*> all;
    for (const SafeTensorsDType& t : kDTypes) all.push_back(t.name);
    c.failTensor(name, fmt::format("unsupported dtype \"{}\" (known: {})", clipped(info.dtype), fmt::join(all, ", ")));
  }
  info.elementBytes = known->bytes;
  info.floatDType = known->floatDType;
  info.shape = parseShape(c, name, entry["shape"]);

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !nonNegativeInt64(offsets[0]) || !nonNegativeInt64(offsets[1]))
    c.failTensor(name, fmt::format("\"data_offsets\" must be [begin, end] with non-negative integers, found {}",
                                   jsonText(offsets)));
  info.begin = *nonNegativeInt64(offsets[0]);
  info.end = *nonNegativeInt64(offsets[1]);
  if (info.begin > info.end)
    c.failTensor(name, fmt::format("data_offsets [{}, {}] end before they begin", info.begin, info.end));
  if (info.end > bufferBytes)
    c.failTensor(name, fmt::format("data_offsets [{}, {}] end at byte {} but the data buffer is {} bytes",
                                   info.begin, info.end, info.end, bufferBytes));
  int64_t needed = 0;
  try {
    needed = mulChecked(info.elementCount(), info.elementBytes);
  } catch (const CountOverflow&) {
    c.failTensor(name, fmt::format("shape [{}] has more bytes than fit in 64 bits", fmt::join(info.shape, ", ")));
  }
  if (info.end - info.begin != needed)
    c.failTensor(name, fmt::format("data_offsets [{}, {}] hold {} bytes but shape [{}] of {} needs {} bytes "
                                   "({} elements x {} bytes)",
                                   info.begin, info.end, info.end - info.begin, fmt::join(info.shape, ", "),
                                   info.dtype, needed, info.elementCount(), info.elementBytes));
  return info;
}

// The tensors tile the data buffer, as the format's reference reader requires: no two
// share a byte, and none of it belongs to no tensor (a gap, or bytes after the last one:
// a file joined to another, or a header that lost entries).
void checkTiling(const Complainer& c, const std::map<std::string, TensorInfo>& tensors, int64_t bufferBytes) {
  std::vector<const TensorInfo*> byBegin;
  for (const auto& [name, info] : tensors)
    if (info.begin < info.end) byBegin.push_back(&info);
  std::sort(byBegin.begin(), byBegin.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  const TensorInfo* furthest = nullptr; // the tensor reaching furthest so far
  for (const TensorInfo* t : byBegin) {
    if (furthest && t->begin < furthest->end)
      c.fail(fmt::format("tensors '{}' (bytes [{}, {})) and '{}' (bytes [{}, {})) overlap", furthest->name,
                         furthest->begin, furthest->end, t->name, t->begin, t->end));
    if (const int64_t covered = furthest ? furthest->end : 0; t->begin > covered)
      c.fail(fmt::format("bytes [{}, {}) of the data buffer belong to no tensor ({} '{}', which starts at byte {})",
                         covered, t->begin, furthest ? fmt::format("after '{}' and before", furthest->name) : "before",
                         t->name, t->begin));
    if (!furthest || t->end > furthest->end) furthest = t;
  }
  if (const int64_t covered = furthest ? furthest->end : 0; covered < bufferBytes)
    c.fail(fmt::format("the data buffer is {} bytes, but its tensors end at byte {}: the last {} bytes belong to no "
                       "tensor{}",
                       bufferBytes, covered, bufferBytes - covered,
                       furthest ? fmt::format(" (after '{}')", furthest->name) : std::string(" (the header lists none)")));
}

// Refuses JSON nested deeper than kMaxJsonDepth, counting brackets outside strings,
// before the parser (or anything that walks the parsed value) sees it. A header needs
// three levels: the object, an entry, its shape.
constexpr int kMaxJsonDepth = 64;
void checkNesting(const Complainer& c, const char* text, size_t length) {
  int depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < length; ++i) {
    const char ch = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') inString = false;
    } else if (ch == '"') {
      inString = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxJsonDepth)
        c.fail(fmt::format("the header nests JSON more than {} levels deep (at byte {} of {}); a safetensors "
                           "header needs 3", kMaxJsonDepth, i, length));
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
}

// The first key that repeats within one JSON object (parsing keeps one of them), with
// the key of the header's entry it lies in. A pass of its own: nlohmann's parse with a
// callback rescans the object after each of its entries, so a header of 40,000
// tensors took 13 s, and one of 250,000 more than 10 minutes.
class FirstDuplicateKey : public nlohmann::json_sax<json> {
public:
  std::string repeated, entry; // entry: "" for the header's own keys
  size_t depth = 0;            // of the object holding `repeated` (1: the header)

  bool start_object(std::size_t) override {
    objects_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!objects_.back().keys.insert(k).second && depth == 0) {
      repeated = k, depth = objects_.size();
      entry = depth >= 2 ? objects_[depth - 2].last : "";
    }
    objects_.back().last = k;
    return true;
  }
  bool end_object() override {
    objects_.pop_back();
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

private:
  struct Object {
    std::set<std::string> keys;
    std::string last;
  };
  std::vector<Object> objects_;
};

// Parses the header, refusing a key used twice in one object (which plain JSON parsing
// would hide): a tensor's name, or a field of its entry.
json parseHeaderJson(const Complainer& c, const char* text, size_t length) {
  if (const void* nul = std::memchr(text, '\0', length))
    c.fail(fmt::format("the {}-byte header is not valid JSON: a NUL byte at offset {}", length,
                       static_cast<const char*>(nul) - text));
  if (length >= 3 && std::memcmp(text, "\xEF\xBB\xBF", 3) == 0) // as the format's reference reader does
    c.fail("the header starts with a UTF-8 byte order mark (EF BB BF); a safetensors header is JSON from its first byte");
  checkNesting(c, text, length);
  json header;
  try {
    header = json::parse(text, text + length);
  } catch (const json::exception& e) {
    // A syntax error (parse_error) or a number too large for a double
    // (out_of_range.406). Drop nlohmann's "[json.exception.parse_error.101] " prefix;
    // its text quotes the offending token, which may be long.
    std::string reason = e.what();
    reason = reason.substr(reason.find("] ") + 2);
    if (e.id == 406) reason = "a number too large for a double: " + reason;
    c.fail(fmt::format("the {}-byte header is not valid JSON: {}", length, clipped(reason, 200)));
  }
  if (!header.is_object()) c.fail(fmt::format("the header is a JSON {}, expected an object", header.type_name()));
  FirstDuplicateKey duplicate;
  json::sax_parse(text, text + length, &duplicate);
  if (duplicate.depth == 1) c.fail(fmt::format("the header lists '{}' more than once", clipped(duplicate.repeated)));
  if (duplicate.depth == 2 && duplicate.entry == "__metadata__")
    c.fail(fmt::format("the header's __metadata__ lists '{}' more than once", clipped(duplicate.repeated)));
  if (duplicate.depth == 2)
    c.failTensor(duplicate.entry, fmt::format("its entry lists '{}' more than once", clipped(duplicate.repeated)));
  if (duplicate.depth > 2)
    c.fail(fmt::format("an object in the header's entry '{}' lists '{}' more than once", clipped(duplicate.entry),
                       clipped(duplicate.repeated)));
  return header;
}

} // namespace

int64_t TensorInfo::elementCount() const {
  int64_t n = 1;
  for (int64_t d : shape) n = mulChecked(n, d);
  return n;
}

namespace {
uint64_t headerLengthOf(const uint8_t* bytes) {
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i) headerLength = headerLength << 8 | bytes[i];
  return headerLength;
}
// The header length against the file's size, then against the format's limit.
void checkHeaderLength(const Complainer& c, uint64_t headerLength, uint64_t size) {
  if (headerLength > size - 8)
    c.fail(fmt::format("not a .safetensors file: the header length {} is past the end of the file ({} bytes, "
                       "so at most {} bytes of header)", headerLength, size, size - 8));
  if (headerLength > kMaxHeaderBytes)
    c.fail(fmt::format("the header length {} is over the format's limit of {} bytes", headerLength,
                       withCommas(int64_t(kMaxHeaderBytes))));
}
} // namespace

SafeTensorsFile SafeTensorsFile::open(const std::string& path) {
  if (std::shared_ptr<const MappedFile> mapped = MappedFile::map(path, "weights file")) {
    const uint8_t* data = mapped->data();
    const size_t size = mapped->size();
    std::string identity = mapped->identity();
    SafeTensorsFile file = parse(path, mapped, data, size);
    file.identity_ = std::move(identity);
    file.mapping_ = std::move(mapped);
    return file;
  }
  // Not a regular file (a pipe): the length first, so that a header claim is judged
  // against the format's limit before the rest is read; then, when the size is unknown,
  // the header, and only the bytes its tensors reach (then the rest is counted, not kept:
  // bytes after the tensors are refused, as in a file): /dev/zero or an endless stream is
  // not read until memory runs out.
  ReadableFile in(path, "weights file");
  const Complainer c{path};
  std::vector<uint8_t> bytes;
  in.readInto(bytes, 8);
  if (bytes.size() == 8) {
    const uint64_t headerLength = headerLengthOf(bytes.data());
    if (in.size() && *in.size() >= 8) checkHeaderLength(c, headerLength, uint64_t(*in.size()));
    else if (headerLength > kMaxHeaderBytes) checkHeaderLength(c, headerLength, UINT64_MAX);
    if (!in.size() && in.readInto(bytes, size_t(headerLength)) == headerLength) {
      const json header = parseHeaderJson(c, reinterpret_cast<const char*>(bytes.data()) + 8, size_t(headerLength));
      uint64_t dataEnd = 0; // the largest end offset a tensor claims (parse() checks them all)
      for (const auto& [name, entry] : header.items())
        if (entry.is_object() && entry.contains("data_offsets") && entry["data_offsets"].is_array() &&
            entry["data_offsets"].size() == 2 && entry["data_offsets"][1].is_number_unsigned())
          dataEnd = std::max(dataEnd, entry["data_offsets"][1].get<uint64_t>());
      in.readInto(bytes, size_t(std::min<uint64_t>(dataEnd, SIZE_MAX / 2)));
      if (const int64_t after = in.skipRest(); after != 0) // as a file's (checkTiling), counted up to a limit
        c.fail(after < 0 ? fmt::format("more than {} bytes follow the tensors' data", withCommas(ReadableFile::kSkipLimit))
                         : fmt::format("{} bytes follow the tensors' data, belonging to no tensor", withCommas(after)));
      return fromBytes(path, std::move(bytes));
    }
  }
  if (in.size()) bytes.reserve(size_t(*in.size()));
  in.readInto(bytes, SIZE_MAX);
  return fromBytes(path, std::move(bytes));
}

SafeTensorsFile SafeTensorsFile::fromBytes(const std::string& name, std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  const uint8_t* data = owned->data();
  const size_t size = owned->size();
  return parse(name, std::move(owned), data, size);
}

SafeTensorsFile SafeTensorsFile::parse(const std::string& name, std::shared_ptr<const void> storage,
                                       const uint8_t* data, size_t size) {
  SafeTensorsFile file;
  file.path_ = name;
  file.storage_ = std::move(storage);
  file.bytes_ = data;
  file.size_ = size;
  const Complainer c{file.path_};
  if (size < 8)
    c.fail(fmt::format("not a .safetensors file: it is {} bytes, the header length alone needs 8", size));
  const uint64_t headerLength = headerLengthOf(file.bytes_);
  checkHeaderLength(c, headerLength, size);
  file.dataStart_ = 8 + headerLength;
  const int64_t bufferBytes = int64_t(size - file.dataStart_);

  json header = parseHeaderJson(c, reinterpret_cast<const char*>(file.bytes_) + 8, headerLength);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) c.fail(fmt::format("\"__metadata__\" must be an object, found {}", jsonText(entry)));
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          c.fail(fmt::format("\"__metadata__\" value for \"{}\" must be a string, found {}", clipped(key),
                             jsonText(value)));
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    file.tensors_.emplace(name, parseTensorEntry(c, name, entry, bufferBytes));
  }
  checkTiling(c, file.tensors_, bufferBytes);
  return file;
}

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& entry : tensors_) out.push_back(entry.first);
  return out;
}

const TensorInfo& SafeTensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw UserError(fmt::format("{}: no tensor named '{}' ({} tensors in the file)", path_, clipped(name), tensors_.size()));
  return it->second;
}

const uint8_t* SafeTensorsFile::rawData(const std::string& name) const {
  return bytes_ + dataStart_ + info(name).begin;
}

const float* SafeTensorsFile::f32InPlace(const std::string& name) const {
  const TensorInfo& t = info(name);
  const uint8_t* p = rawData(name);
  if (t.floatDType != DType::F32 || reinterpret_cast<uintptr_t>(p) % alignof(float) != 0) return nullptr;
  return reinterpret_cast<const float*>(p);
}

std::vector<float> SafeTensorsFile::readF32(const std::string& name) const {
  const TensorInfo& t = info(name);
  if (!t.floatDType)
    throw UserError(fmt::format("{}: tensor '{}' is stored as {}; nnc reads weights stored as F32, F16 or BF16",
                                path_, clipped(name), t.dtype));
  const uint8_t* p = rawData(name);
  std::vector<float> out(size_t(t.elementCount()));
  if (*t.floatDType == DType::F32) {
    if (!out.empty()) std::memcpy(out.data(), p, out.size() * 4);
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, p + 2 * i, 2);
    out[i] = *t.floatDType == DType::F16 ? halfToFloat(bits) : bf16ToFloat(bits);
  }
  return out;
}

void writeSafeTensors(const std::string& path, const std::vector<NamedF32Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const NamedF32Tensor& t : tensors) {
    int64_t count = 1;
    for (int64_t d : t.shape) count = mulChecked(count, d);
    if (count != int64_t(t.data.size()))
      throw std::invalid_argument(fmt::format("writeSafeTensors: tensor '{}' has {} values for shape [{}]", t.name,
                                              t.data.size(), fmt::join(t.shape, ", ")));
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * count}}};
    offset += 4 * count;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = char(uint64_t(text.size()) >> (8 * i) & 0xff);
  file += text;
  for (const NamedF32Tensor& t : tensors)
    file.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
  writeFileBytes(path, "weights file", file.data(), file.size());
}

} // namespace nnc
