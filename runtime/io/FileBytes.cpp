#include "runtime/io/FileBytes.h"

#include "runtime/ThreadPool.h"

#include <cerrno>
#include <climits>
#include <ctime>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "compiler/support/Error.h"

namespace nnc {

namespace {
struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;
// The 4.4 GB of a 1.1B-parameter model in f32 took 0.4 s of one core here, so a large
// file is split over a few threads (256 MiB or more each). MADV_POPULATE_READ is Linux
// 5.14's; on an older kernel it fails, and the pages are only read ahead (WILLNEED).
void populatePages(void* p, size_t size) {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22; // Linux's value, for C libraries older than it
#endif
  constexpr size_t kPerThread = size_t(256) << 20;
  const size_t cores = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  const size_t threads = std::clamp<size_t>(size / kPerThread, 1, cores);
  const size_t share = (size / threads + 4095) & ~size_t(4095);
  auto fill = [&](size_t t) {
    if (t * share >= size) return;
    uint8_t* from = static_cast<uint8_t*>(p) + t * share;
    const size_t bytes = std::min(share, size - t * share);
    if (::madvise(from, bytes, MADV_POPULATE_READ) != 0) ::madvise(from, bytes, MADV_WILLNEED);
  };
  runtime::runEach(threads, fill);
}
} // namespace

ReadableFile::ReadableFile(const std::string& path, const char* role) : path_(path), role_(role) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw UserError(fmt::format("{}: cannot open {}: {}", path, role, std::strerror(errno)));
  struct stat st;
  if (fstat(fileno(file_), &st) == 0 && S_ISREG(st.st_mode)) size_ = int64_t(st.st_size);
}

ReadableFile::~ReadableFile() { std::fclose(file_); }

size_t ReadableFile::readInto(std::vector<uint8_t>& out, size_t n) {
  size_t total = 0;
  uint8_t chunk[1 << 16];
  while (total < n) {
    size_t got = std::fread(chunk, 1, std::min(sizeof chunk, n - total), file_);
    out.insert(out.end(), chunk, chunk + got);
    total += got;
    if (got == 0) break;
  }
  if (std::ferror(file_))
    throw UserError(fmt::format("{}: cannot read {}: {}", path_, role_, std::strerror(errno)));
  return total;
}

int64_t ReadableFile::skipRest(int64_t limit) {
  int64_t total = 0;
  uint8_t chunk[1 << 16];
  for (size_t got; (got = std::fread(chunk, 1, sizeof chunk, file_)) > 0;)
    if ((total += int64_t(got)) > limit) return -1;
  if (std::ferror(file_))
    throw UserError(fmt::format("{}: cannot read {}: {}", path_, role_, std::strerror(errno)));
  return total;
}

std::shared_ptr<const MappedFile> MappedFile::map(const std::string& path, const char* role) {
  // Not opened unless regular: opening a FIFO here, and again to read it, took its
  // writer's stream with the first open and blocked the second forever.
  struct stat before;
  if (::stat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode)) return nullptr;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(fmt::format("{}: cannot open {}: {}", path, role, std::strerror(errno)));
  struct stat st;
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  // The change time too: `cp -p`, `tar x` or `touch -d` over a rewritten file restore its
  // size and mtime, but no program can set ctime back.
  const int64_t mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const int64_t ctime = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const bool settled = mtime < (int64_t(now.tv_sec) - 2) * 1000000000 + now.tv_nsec;
  std::string identity = settled ? fmt::format("{}:{}:{}:{}:{}", uint64_t(st.st_dev), uint64_t(st.st_ino),
                                               int64_t(st.st_size), mtime, ctime)
                                 : std::string();
  return std::shared_ptr<const MappedFile>(
      new MappedFile(static_cast<const uint8_t*>(p), size_t(st.st_size), fd, std::move(identity)));
}

bool MappedFile::read(const void* at, size_t bytes, void* to) const {
  const auto* from = static_cast<const uint8_t*>(at);
  if (from < data_ || from > data_ + size_ || bytes > size_t(data_ + size_ - from)) return false;
  auto* out = static_cast<uint8_t*>(to);
  for (size_t done = 0; done < bytes;) {
    const ssize_t got = ::pread(fd_, out + done, bytes - done, off_t(from - data_) + off_t(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false; // an error, or the file shrank under the mapping
    done += size_t(got);
  }
  return true;
}

void MappedFile::populate() const { populatePages(const_cast<uint8_t*>(data_), size_); }

void MappedFile::populate(const void* at, size_t bytes) const {
  const auto* from = std::max(static_cast<const uint8_t*>(at), data_);
  const auto* end = std::min(static_cast<const uint8_t*>(at) + bytes, data_ + size_);
  if (from >= end) return;
  const size_t skip = size_t(from - data_) % 4096; // the mapping starts page-aligned
  populatePages(const_cast<uint8_t*>(from - skip), size_t(end - from) + skip);
}

MappedFile::~MappedFile() {
  ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

std::vector<uint8_t> readFileBytes(const std::string& path, const char* role) {
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (!file) throw UserError(fmt::format("{}: cannot open {}: {}", path, role, std::strerror(errno)));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  // Read to EOF rather than trusting a size from stat: works for pipes too.
  for (;;) {
    size_t got = std::fread(chunk, 1, sizeof chunk, file.get());
    bytes.insert(bytes.end(), chunk, chunk + got);
    if (got < sizeof chunk) break;
  }
  if (std::ferror(file.get()))
    throw UserError(fmt::format("{}: cannot read {}: {}", path, role, std::strerror(errno)));
  return bytes;
}

void writeFileBytes(const std::string& path, const char* role, const void* data, size_t size) {
  FilePtr file(std::fopen(path.c_str(), "wb"));
  if (!file) throw UserError(fmt::format("{}: cannot create {}: {}", path, role, std::strerror(errno)));
  bool ok = std::fwrite(data, 1, size, file.get()) == size;
  ok = std::fclose(file.release()) == 0 && ok;
  if (!ok) throw UserError(fmt::format("{}: cannot write {} ({} bytes): {}", path, role, size, std::strerror(errno)));
}

bool hasExtension(const std::string& path, const char* extension) {
  size_t n = std::strlen(extension);
  if (path.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    char a = path[path.size() - n + i], b = extension[i];
    if (a >= 'A' && a <= 'Z') a = char(a - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

namespace {
// Every piece, in writev calls of up to IOV_MAX pieces; 0 or the errno. One long write,
// not one per piece: a file system whose page cache takes large folios (ext4 since
// Linux 6.16) sizes each folio by what is left of the write, so a write per piece left
// the 2 MiB around each piece's ends in small folios, and a mapping of the file (a
// weight cache entry) read those through 4 KiB pages. Xeon guest with AMX, Linux 6.18:
// TinyLlama's i4 entry (604 MB) had 420 MB in 2 MiB folios after a write per piece, all
// of it after writev; a file of 260 pieces of 2.36 MB, 70 and 600 of its 614 MB
// (docs/cli.md, "The weight cache").
int writePieces(int fd, const std::vector<FilePiece>& pieces) {
  std::vector<iovec> left;
  for (const FilePiece& piece : pieces)
    if (piece.size > 0) left.push_back({const_cast<void*>(piece.data), piece.size});
  for (size_t first = 0; first < left.size();) {
    const ssize_t n = ::writev(fd, left.data() + first, int(std::min<size_t>(left.size() - first, IOV_MAX)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    for (size_t done = size_t(n); done > 0;) { // past the n bytes written: whole pieces, then part of one
      const size_t step = std::min(done, left[first].iov_len);
      left[first].iov_base = static_cast<char*>(left[first].iov_base) + step;
      left[first].iov_len -= step;
      done -= step;
      if (left[first].iov_len == 0) ++first;
    }
  }
  return 0;
}
} // namespace

int writeFileReplacing(const std::string& path, const std::vector<FilePiece>& pieces) {
  std::string temp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) return errno;
  int writeErrno = writePieces(fd, pieces);
  if (::close(fd) != 0 && !writeErrno) writeErrno = errno;
  if (!writeErrno && std::rename(temp.c_str(), path.c_str()) != 0) writeErrno = errno;
  if (writeErrno) ::unlink(temp.c_str());
  return writeErrno;
}

} // namespace nnc
