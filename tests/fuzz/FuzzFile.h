// The readers under fuzz take a path; an in-memory file (memfd) gives them one without
// touching the disk, and it is a regular file, so the size checks run as for real files.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace nnc_fuzz {

class MemFile {
public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("nnc-fuzz", 0);
    if (fd_ < 0) std::abort();
    for (size_t done = 0; done < size;) {
      ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += size_t(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  const std::string& path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

} // namespace nnc_fuzz
