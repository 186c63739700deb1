// Test helpers: .safetensors files edited as a checkpoint from elsewhere would have them
// (tensors renamed, a tensor saved twice), by their JSON header; the data bytes are kept.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

namespace nnc::testing {

// A .safetensors file as its JSON header and its data bytes.
struct SafeTensorsBytes {
  nlohmann::ordered_json header;
  std::string data;

  explicit SafeTensorsBytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(bytes[size_t(i)]);
    header = nlohmann::ordered_json::parse(bytes.substr(8, n));
    data = bytes.substr(8 + n);
  }
  std::string bytes() const {
    const std::string text = header.dump();
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i) len[size_t(i)] = char(uint64_t(text.size()) >> (8 * i) & 0xff);
    return len + text + data;
  }
};

// The .safetensors file at `path` with its tensors renamed by `names` (old -> new); the
// data bytes are kept as they are.
inline std::string renamed(const std::string &path, const std::map<std::string, std::string> &names) {
  SafeTensorsBytes file(path);
  nlohmann::ordered_json out;
  for (auto &[key, value] : file.header.items()) out[names.count(key) ? names.at(key) : key] = value;
  file.header = out;
  return file.bytes();
}

// The .safetensors file at `path` with tensor `from`'s data bytes appended as a new tensor
// `to`, its element `changed` (when >= 0) made 1.5 larger.
inline std::string withCopy(const std::string &path, const std::string &from, const std::string &to, int64_t changed = -1) {
  SafeTensorsBytes file(path);
  const nlohmann::ordered_json source = file.header.at(from);
  const size_t begin = source["data_offsets"][0], end = source["data_offsets"][1];
  std::string copy = file.data.substr(begin, end - begin);
  if (changed >= 0) {
    float v;
    std::memcpy(&v, copy.data() + 4 * changed, 4);
    v += 1.5f;
    std::memcpy(copy.data() + 4 * changed, &v, 4);
  }
  file.header[to] = source;
  file.header[to]["data_offsets"] = {file.data.size(), file.data.size() + copy.size()};
  file.data += copy;
  return file.bytes();
}

} // namespace nnc::testing
