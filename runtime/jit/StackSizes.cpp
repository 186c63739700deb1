#include "runtime/jit/StackSizes.h"

#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/LEB128.h>

namespace nnc::runtime {

std::optional<size_t> objectStackBytes(llvm::MemoryBufferRef object) {
  llvm::Expected<std::unique_ptr<llvm::object::ObjectFile>> file = llvm::object::ObjectFile::createObjectFile(object);
  if (!file) {
    llvm::consumeError(file.takeError());
    return std::nullopt;
  }
  const size_t addressBytes = (*file)->getBytesInAddress();
  std::optional<size_t> total;
  for (const llvm::object::SectionRef &section : (*file)->sections()) {
    llvm::Expected<llvm::StringRef> name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      return std::nullopt;
    }
    if (*name != ".stack_sizes") continue;
    llvm::Expected<llvm::StringRef> contents = section.getContents();
    if (!contents) {
      llvm::consumeError(contents.takeError());
      return std::nullopt;
    }
    const auto *p = reinterpret_cast<const uint8_t *>(contents->data()), *end = p + contents->size();
    while (p < end) { // entries: address, then the frame's size
      if (size_t(end - p) < addressBytes) return std::nullopt;
      p += addressBytes;
      unsigned length = 0;
      const char *error = nullptr;
      const uint64_t frame = llvm::decodeULEB128(p, &length, end, &error);
      if (error) return std::nullopt;
      p += length;
      total = total.value_or(0) + size_t(frame);
    }
  }
  return total;
}

} // namespace nnc::runtime
