// The preamble of a .npy file: magic "\x93NUMPY", version, header length, then a
// Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
//
// parseNpyHeader accepts versions 1.0 (2-byte length), 2.0 and 3.0 (4-byte length),
// and exactly the keys descr, fortran_order, shape. It checks the framing only (the
// dtype and order are judged by the caller) and never reads past `bytes`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nnc {

struct NpyHeader {
  std::string descr; // e.g. "<f4"; for a structured dtype, its list as written
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  size_t dataOffset = 0; // where the array data starts in the file
};

NpyHeader parseNpyHeader(const std::string& path, const std::vector<uint8_t>& bytes);

// Where the header of a file starting with `prefix` ends (the data's offset), from its
// magic, version and length fields; 0 when `prefix` is too short or not a .npy
// preamble (parseNpyHeader then says why). Needs the first 12 bytes at most.
size_t npyDataOffset(const std::vector<uint8_t>& prefix);
inline constexpr size_t kNpyPreambleMaxBytes = 12;
// The longest header dict nnc reads (NumPy's own reader stops at 10,000 bytes).
inline constexpr size_t kNpyMaxHeaderBytes = 1 << 20;

// The whole version 1.0 preamble for `descr` and `shape`, padded with spaces and a
// final newline so the data starts at a multiple of 64 bytes.
std::string formatNpyPreamble(const std::string& descr, const std::vector<int64_t>& shape);

std::string formatShape(const std::vector<int64_t>& shape); // "(2, 3)", "(5,)", "()"

} // namespace nnc
