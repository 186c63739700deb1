// Build IDs from the loaded ELF objects' PT_NOTE segments (dl_iterate_phdr).
#include "runtime/jit/CodeFingerprint.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

#include <llvm-c/Core.h>

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "compiler/codegen/GemmEmitter.h"

namespace nnc::runtime {

namespace {

struct Search {
  uintptr_t address;
  std::string buildId; // hex; empty when the object has none
  bool found = false;
};

// The NT_GNU_BUILD_ID note of the object containing search->address.
int visitObject(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum && !contains; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    contains = ph.p_type == PT_LOAD && search->address >= begin && search->address < begin + ph.p_memsz;
  }
  if (!contains) return 0;
  search->found = true;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof note);
      const char* name = p + sizeof note;
      const char* desc = name + ((note.n_namesz + 3) & ~3u);
      const char* next = desc + ((note.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (uint32_t b = 0; b < note.n_descsz; ++b)
          search->buildId += fmt::format("{:02x}", static_cast<unsigned char>(desc[b]));
        return 1;
      }
      p = next;
    }
  }
  return 1;
}

// The build ID of the object holding `address`, else its path, size and mtime.
std::string identify(const void* address) {
  Search search{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(visitObject, &search);
  if (!search.buildId.empty()) return search.buildId;
  Dl_info info{};
  std::string path = dladdr(address, &info) && info.dli_fname && *info.dli_fname ? info.dli_fname
                                                                                 : "/proc/self/exe";
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return "unknown:" + path;
  return fmt::format("{}:{}:{}.{}", path, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

} // namespace

const std::string& codeFingerprint() {
  static const std::string fingerprint = [] {
    unsigned major = 0, minor = 0, patch = 0;
    LLVMGetVersion(&major, &minor, &patch);
    return fmt::format("nnc:{} llvm:{}.{}.{}:{}",
                       identify(reinterpret_cast<const void*>(&codegen::emitGemmModule)), major,
                       minor, patch, identify(reinterpret_cast<const void*>(&LLVMGetVersion)));
  }();
  return fingerprint;
}

} // namespace nnc::runtime
