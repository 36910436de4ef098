#include "runtime/weights/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "runtime/error.hpp"

namespace lathe::weights {

namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw Error(err == ENOENT ? ErrorKind::NotFound : ErrorKind::Io, path + ": " + what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of the constructor; the mapping
// outlives it.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) fail(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Io, path + ": not a regular file");
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;  // mmap refuses a length of 0
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (p == MAP_FAILED) fail(path, "cannot map", errno);
  data_ = static_cast<const std::byte*>(p);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace lathe::weights
