// NumPy .npy files (format versions 1.0, 2.0, 3.0) and raw little-endian inputs.
//
// Accepted element types in a .npy file: '<f4', '<f2', '<f8', '<i4', '<i8', in C
// order (fortran_order False). The array is
// converted to the dtype the caller asks for:
//   f32        <- f4 (as is), f2 (exact), f8 (rounded to nearest), i4/i8 (only when
//                 every value is an integer an f32 holds exactly, |v| <= 2^24)
//   f16, bf16  <- the same sources, through f32, rounded to nearest even
//   i32        <- i4 (as is), i8 (only when every value fits in 32 bits)
// Anything else is refused. Every problem with a file is a UserError that names the
// file and states what was expected and what was found, with the numbers.
// Assumes a little-endian host. Never reads outside the bytes the file has.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/support/DType.h"
#include "compiler/support/Error.h"
#include "runtime/io/NpyHeader.h"

namespace nnc {

// A dense, C-ordered tensor in host memory; `data` holds bytesFor(elements, dtype)
// little-endian bytes.
struct NpyArray {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::vector<uint8_t> data;

  int64_t elementCount() const; // prod(shape); 1 for a scalar
};

// Reads a .npy file and converts it to `want` (see the table above). The header is
// read first and checked against the file's size before the data is read, so a file
// that claims more than it holds costs nothing; `beforeData`, when given, sees the
// header then and may refuse it (throw) before any memory goes to the data.
NpyArray readNpy(const std::string& path, DType want = DType::F32,
                 const std::function<void(const NpyHeader&)>& beforeData = {});

// The elements of an f32, f16, bf16 or i32 array as floats (i32 values rounded).
std::vector<float> toFloats(const NpyArray& array);

NpyArray makeF32Array(std::vector<int64_t> shape, const std::vector<float>& values);

// Writes a version 1.0 .npy ('<f4', '<f2' or '<i4'; other dtypes have no NumPy
// equivalent and are an internal error). The header is padded to 64 bytes.
void writeNpy(const std::string& path, const NpyArray& array);

// Raw input: exactly `expectedElements` little-endian elements of `dtype`, no header.
// A file of another size throws RawInputSizeError, before anything is read when the
// file's size is known (a regular file); a pipe is read up to the expected size and
// the rest only counted.
std::vector<uint8_t> readRawInput(const std::string& path, int64_t expectedElements,
                                  DType dtype);

// A raw input of the wrong size. The message states both sizes in elements and bytes;
// the fields let the caller add advice (e.g. the batch size that would fit).
class RawInputSizeError : public UserError {
public:
  RawInputSizeError(const std::string& message, int64_t expectedElements,
                    int64_t foundBytes, int64_t foundElements, bool wholeElements)
      : UserError(message), expectedElements(expectedElements), foundBytes(foundBytes),
        foundElements(foundElements), wholeElements(wholeElements) {}
  int64_t expectedElements;
  int64_t foundBytes;
  int64_t foundElements; // whole elements in the file (rounded down)
  bool wholeElements;    // false when the size is not a multiple of the element size
};

} // namespace nnc
