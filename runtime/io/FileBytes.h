// Whole-file reads and writes for the input, output and weight file formats.
// Any failure (missing file, a directory, a short write) is a UserError that names
// the file, says what it was for (`role`, e.g. "weights file") and gives the OS reason.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nnc {

std::vector<uint8_t> readFileBytes(const std::string& path, const char* role);

void writeFileBytes(const std::string& path, const char* role, const void* data,
                    size_t size);

// True when `path` ends with `extension` (e.g. ".npy"), ignoring ASCII case.
bool hasExtension(const std::string& path, const char* extension);

} // namespace nnc
