// .safetensors weight files: an 8-byte little-endian header length N, N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [out, in], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>", ...}}
// then the data buffer; offsets are relative to the buffer's start.
//
// open() maps the file (runtime/io/FileBytes.h: MappedFile; a pipe is read instead) and
// validates every entry before returning; each
// problem is a UserError naming the file (and the tensor) with the numbers involved:
// a short file, a header length past the end, bad JSON, a missing or mistyped field,
// an unknown dtype, negative or overflowing shapes, offsets out of order or past the
// buffer, a byte size that disagrees with the shape, overlapping tensors (both named),
// a name used twice. Gaps between tensors are allowed.
// Every safetensors dtype is accepted at open (a checkpoint may carry I64 buffers);
// only F32, F16 and BF16 can be read as floats.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/DType.h"
#include "runtime/io/FileBytes.h"

namespace nnc {

struct TensorInfo {
  std::string name;
  std::string dtype;               // as spelled in the file: "F32", "BF16", "I64", ...
  std::optional<DType> floatDType; // F32, F16 or BF16 when readF32 can load it
  int elementBytes = 0;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0; // byte range in the data buffer

  int64_t elementCount() const; // prod(shape); 1 for a scalar
};

class SafeTensorsFile {
public:
  static SafeTensorsFile open(const std::string& path);
  // The same checks on bytes already in memory; `name` stands for the path in errors.
  static SafeTensorsFile fromBytes(const std::string& name, std::vector<uint8_t> bytes);

  const std::string& path() const { return path_; }
  // The mapped file's identity (MappedFile::identity); "" for bytes read from a pipe or
  // given in memory, which have none.
  const std::string& identity() const { return identity_; }
  std::vector<std::string> names() const; // sorted
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const; // UserError if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor's bytes as stored (little-endian), info(name).end - begin of them; they
  // live as long as this object or a copy of storage().
  const uint8_t* rawData(const std::string& name) const;
  // Holds the file's bytes (the mapping or the buffer) alive for views into them.
  std::shared_ptr<const void> storage() const { return storage_; }
  // The mapping the bytes are in (MappedFile::populate before reading them all); null
  // for bytes read from a pipe or given in memory.
  const std::shared_ptr<const MappedFile>& mapping() const { return mapping_; }
  // The tensor's F32 values in place, when it is stored as F32 at a 4-byte aligned
  // address; null otherwise (readF32 then converts or copies).
  const float* f32InPlace(const std::string& name) const;
  // The tensor converted to f32; a UserError for dtypes other than F32/F16/BF16.
  std::vector<float> readF32(const std::string& name) const;

private:
  // Validates the bytes [data, data + size) that `storage` keeps alive.
  static SafeTensorsFile parse(const std::string& name, std::shared_ptr<const void> storage,
                               const uint8_t* data, size_t size);

  std::string path_;
  std::string identity_;
  std::shared_ptr<const void> storage_; // owns the whole file's bytes
  std::shared_ptr<const MappedFile> mapping_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  size_t dataStart_ = 0; // 8 + header length
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedF32Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Writes F32 tensors in the given order, header padded with spaces to 8 bytes.
// A data size that disagrees with its shape is a programming error (invalid_argument).
void writeSafeTensors(const std::string& path, const std::vector<NamedF32Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

} // namespace nnc
