// Reading and writing .npy arrays and raw inputs; the header framing is NpyHeader.cpp.
#include "runtime/io/Npy.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

#include "compiler/support/Diagnostics.h"
#include "runtime/io/FileBytes.h"
#include "runtime/io/HalfFloat.h"
#include "runtime/io/NpyHeader.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "nnc's file readers assume a little-endian host");

namespace nnc {

namespace {

// An element type a .npy file may hold.
struct NpyElementType {
  const char* descr;
  int size;
  bool isFloat;
};
constexpr NpyElementType kAccepted[] = {
    {"<f4", 4, true}, {"<f2", 2, true}, {"<f8", 8, true}, {"<i4", 4, false}, {"<i8", 8, false}};
// The element types a file read as `want` may hold: token ids (i32) only integers.
const char* acceptedList(DType want) {
  return want == DType::I32 ? "'<i4', '<i8'" : "'<f4', '<f2', '<f8', '<i4', '<i8'";
}
bool acceptedAs(const NpyElementType& t, DType want) { return want != DType::I32 || !t.isFloat; }

const NpyElementType& lookUpElementType(const std::string& path, const std::string& descr, DType want) {
  for (const NpyElementType& t : kAccepted)
    if (descr == t.descr) return t;
  if (descr.size() >= 2 && descr[0] == '>')
    for (const NpyElementType& t : kAccepted)
      if (descr.substr(1) == t.descr + 1 && acceptedAs(t, want))
        throw UserError(fmt::format("{}: .npy array is big-endian ('{}'); expected little-endian "
                                    "'{}' (in NumPy: a.astype('{}'))", path, descr, t.descr, t.descr));
  throw UserError(fmt::format("{}: unsupported .npy dtype '{}'; accepted{}: {}", path, clipped(descr),
                              want == DType::I32 ? " for i32" : "", acceptedList(want)));
}

template <typename T> T loadLittleEndian(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

double loadFloat(const NpyElementType& t, const uint8_t* p) {
  switch (t.size) {
  case 2: return halfToFloat(loadLittleEndian<uint16_t>(p));
  case 4: return loadLittleEndian<float>(p);
  default: return loadLittleEndian<double>(p);
  }
}
int64_t loadInt(const NpyElementType& t, const uint8_t* p) {
  return t.size == 4 ? loadLittleEndian<int32_t>(p) : loadLittleEndian<int64_t>(p);
}

// A finite value the conversion turned into ±inf: refused, as an inexact integer is.
void requireInRange(const std::string& path, int64_t index, double value, float converted, DType to) {
  if (std::isfinite(value) && !std::isfinite(converted))
    throw UserError(fmt::format("{}: element {} is {:g}, beyond the range of {} (largest finite {:g}); scale the "
                                "array first",
                                path, index, value, dtypeName(to),
                                to == DType::F16 ? 65504.0 : to == DType::BF16 ? 3.3895313892515355e38
                                                                                : 3.4028234663852886e38));
}

// One element as f32: floats rounded to nearest (finite ones to finite ones), integers only when exact.
float elementAsFloat(const std::string& path, const NpyElementType& t, const uint8_t* p, int64_t index) {
  if (t.isFloat) {
    const double v = loadFloat(t, p);
    requireInRange(path, index, v, float(v), DType::F32);
    return float(v);
  }
  int64_t v = loadInt(t, p);
  constexpr int64_t kExactLimit = int64_t(1) << 24;
  if (v > kExactLimit || v < -kExactLimit)
    throw UserError(fmt::format("{}: element {} is the integer {}, which f32 cannot hold exactly (only "
                                "|v| <= {} is exact); convert the array to float32 first",
                                path, index, v, kExactLimit));
  return float(v);
}

void convertElements(const std::string& path, const NpyElementType& from, const uint8_t* src,
                     int64_t count, DType to, uint8_t* dst) {
  for (int64_t i = 0; i < count; ++i, src += from.size) {
    switch (to) {
    case DType::F32: {
      float f = elementAsFloat(path, from, src, i);
      std::memcpy(dst + 4 * i, &f, 4);
      break;
    }
    case DType::F16:
    case DType::BF16: {
      float f = elementAsFloat(path, from, src, i);
      uint16_t h = to == DType::F16 ? floatToHalf(f) : floatToBf16(f);
      requireInRange(path, i, f, to == DType::F16 ? halfToFloat(h) : bf16ToFloat(h), to);
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    case DType::I32: {
      int64_t v = loadInt(from, src);
      if (v != int32_t(v))
        throw UserError(fmt::format("{}: element {} is {}, outside the i32 range [{}, {}]", path, i, v,
                                    INT32_MIN, INT32_MAX));
      int32_t narrow = int32_t(v);
      std::memcpy(dst + 4 * i, &narrow, 4);
      break;
    }
    default: break; // refused before the loop
    }
  }
}

} // namespace

int64_t NpyArray::elementCount() const {
  int64_t n = 1;
  for (int64_t d : shape) n = mulChecked(n, d);
  return n;
}

NpyArray readNpy(const std::string& path, DType want, const std::function<void(const NpyHeader&)>& beforeData) {
  ReadableFile file(path, ".npy file");
  // The preamble, then the header it announces (up to the limit), then the framing.
  std::vector<uint8_t> bytes;
  file.readInto(bytes, kNpyPreambleMaxBytes);
  if (size_t dataOffset = npyDataOffset(bytes); dataOffset > bytes.size()) {
    if (dataOffset - kNpyPreambleMaxBytes > kNpyMaxHeaderBytes && (!file.size() || *file.size() >= int64_t(dataOffset)))
      throw UserError(fmt::format("{}: .npy header length {} is over the {}-byte limit nnc reads", path,
                                  withCommas(int64_t(dataOffset - kNpyPreambleMaxBytes)),
                                  withCommas(int64_t(kNpyMaxHeaderBytes))));
    file.readInto(bytes, std::min(dataOffset, kNpyPreambleMaxBytes + kNpyMaxHeaderBytes) - bytes.size());
  }
  NpyHeader header = parseNpyHeader(path, bytes);
  if (header.descr.size() && header.descr[0] == '[')
    throw UserError(fmt::format("{}: unsupported .npy dtype: a structured dtype {}; accepted{}: {}", path,
                                clipped(header.descr), want == DType::I32 ? " for i32" : "", acceptedList(want)));
  const NpyElementType& type = lookUpElementType(path, header.descr, want);
  if (header.fortranOrder)
    throw UserError(fmt::format("{}: .npy array is in Fortran (column-major) order; expected C order "
                                "(fortran_order False; in NumPy: np.ascontiguousarray(a))", path));
  if (want != DType::F32 && want != DType::F16 && want != DType::BF16 && want != DType::I32)
    throw UserError(fmt::format("{}: cannot read a .npy file as {}; readable as f32, f16, bf16, i32", path,
                                dtypeName(want)));
  if (want == DType::I32 && type.isFloat)
    throw UserError(fmt::format("{}: .npy dtype '{}' is floating point but an i32 input was expected; "
                                "accepted for i32: '<i4', '<i8'", path, header.descr));

  NpyArray array{header.shape, want, {}};
  int64_t elements = 0, expectedBytes = 0, convertedBytes = 0;
  try {
    elements = array.elementCount();
    expectedBytes = mulChecked(elements, type.size);
    convertedBytes = bytesFor(elements, want);
  } catch (const CountOverflow&) {
    throw UserError(fmt::format("{}: .npy shape {} has more bytes than fit in 64 bits", path,
                                formatShape(header.shape)));
  }
  auto wrongSize = [&](int64_t foundBytes) {
    return UserError(fmt::format("{}: .npy data is {} bytes but shape {} of '{}' needs {} bytes ({} elements "
                                 "x {} bytes); the file {}",
                                 path, foundBytes, formatShape(header.shape), header.descr, expectedBytes, elements,
                                 type.size, foundBytes < expectedBytes ? "is truncated" : "has extra bytes at the end"));
  };
  // The claim against the file, before any memory goes to the data.
  if (file.size() && *file.size() - int64_t(header.dataOffset) != expectedBytes)
    throw wrongSize(*file.size() - int64_t(header.dataOffset));
  if (beforeData) beforeData(header);

  std::vector<uint8_t> data(bytes.begin() + int64_t(header.dataOffset), bytes.end());
  bytes = {};
  if (file.size()) data.reserve(size_t(expectedBytes)); // known to be there
  if (int64_t(data.size()) < expectedBytes) file.readInto(data, size_t(expectedBytes) - data.size());
  if (int64_t(data.size()) != expectedBytes) throw wrongSize(int64_t(data.size()));
  if (int64_t extra = file.skipRest(); extra > 0) throw wrongSize(expectedBytes + extra);
  else if (extra < 0)
    throw UserError(fmt::format("{}: more than {} bytes follow the data that the .npy header describes", path,
                                withCommas(ReadableFile::kSkipLimit)));
  array.data.resize(size_t(convertedBytes));
  convertElements(path, type, data.data(), elements, want, array.data.data());
  return array;
}

std::vector<float> toFloats(const NpyArray& array) {
  const int64_t n = array.elementCount();
  std::vector<float> out(size_t(n), 0.0f);
  const uint8_t* p = array.data.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (array.dtype) {
    case DType::F32: out[i] = loadLittleEndian<float>(p + 4 * i); break;
    case DType::F16: out[i] = halfToFloat(loadLittleEndian<uint16_t>(p + 2 * i)); break;
    case DType::BF16: out[i] = bf16ToFloat(loadLittleEndian<uint16_t>(p + 2 * i)); break;
    case DType::I32: out[i] = float(loadLittleEndian<int32_t>(p + 4 * i)); break;
    default:
      throw std::invalid_argument(fmt::format("toFloats: unsupported dtype {}", dtypeName(array.dtype)));
    }
  }
  return out;
}

NpyArray makeF32Array(std::vector<int64_t> shape, const std::vector<float>& values) {
  NpyArray array{std::move(shape), DType::F32, {}};
  if (array.elementCount() != int64_t(values.size()))
    throw std::invalid_argument(fmt::format("makeF32Array: {} values for shape {}", values.size(),
                                            formatShape(array.shape)));
  array.data.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(array.data.data(), values.data(), array.data.size());
  return array;
}

void writeNpy(const std::string& path, const NpyArray& array) {
  const char* descr = array.dtype == DType::F32   ? "<f4"
                      : array.dtype == DType::F16 ? "<f2"
                      : array.dtype == DType::I32 ? "<i4"
                                                  : nullptr;
  if (!descr || int64_t(array.data.size()) != bytesFor(array.elementCount(), array.dtype))
    throw std::invalid_argument(fmt::format("writeNpy: cannot write {} bytes of {} with shape {}",
                                            array.data.size(), dtypeName(array.dtype), formatShape(array.shape)));
  std::string file = formatNpyPreamble(descr, array.shape);
  file.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  writeFileBytes(path, ".npy file", file.data(), file.size());
}

std::vector<uint8_t> readRawInput(const std::string& path, int64_t expectedElements, DType dtype) {
  ReadableFile file(path, "raw input file");
  const int64_t expectedBytes = bytesFor(expectedElements, dtype);
  std::vector<uint8_t> bytes;
  int64_t foundBytes = 0;
  // A size the file system states is compared before anything is read, except a small
  // one: /proc and /sys files state 0 or 4096 bytes whatever they hold, so it is counted.
  constexpr int64_t kCountedBelow = 64 * 1024;
  if (file.size() && (*file.size() == expectedBytes || *file.size() >= kCountedBelow)) {
    foundBytes = *file.size();
    if (foundBytes == expectedBytes) {
      bytes.reserve(size_t(expectedBytes));
      foundBytes = int64_t(file.readInto(bytes, size_t(expectedBytes)));
      const int64_t extra = file.skipRest(); // the file changed under us: still say so below
      foundBytes = extra < 0 ? -1 : foundBytes + extra;
    }
  } else {
    foundBytes = int64_t(file.readInto(bytes, size_t(expectedBytes)));
    const int64_t extra = file.skipRest();
    foundBytes = extra < 0 ? -1 : foundBytes + extra;
  }
  if (foundBytes == expectedBytes) return bytes;
  if (foundBytes < 0) // an endless stream: /dev/zero, `yes |`
    throw UserError(fmt::format("{}: raw input has the wrong size: expected {} {} elements ({} bytes), found more "
                                "than {} bytes",
                                path, expectedElements, dtypeName(dtype), expectedBytes,
                                withCommas(expectedBytes + ReadableFile::kSkipLimit)));
  const int bits = dtypeBits(dtype);
  const int64_t foundElements = foundBytes * 8 / bits;
  const bool whole = foundBytes * 8 % bits == 0;
  const std::string foundText =
      whole ? fmt::format("{} elements", foundElements)
            : fmt::format("{} whole elements and {} bytes over: not a multiple of the {}-byte element", foundElements,
                          foundBytes - foundElements * bits / 8, bits / 8);
  throw RawInputSizeError(
      fmt::format("{}: raw input has the wrong size: expected {} {} elements ({} bytes), found {} bytes ({})", path,
                  expectedElements, dtypeName(dtype), expectedBytes, foundBytes, foundText),
      expectedElements, foundBytes, foundElements, whole);
}

} // namespace nnc
