// A read-only memory mapping of a whole file: weights are read in place,
// never copied into the heap first (a 1 GB checkpoint stays in the page
// cache, shared with other processes).
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace lathe::weights {

class MappedFile {
 public:
  // Throws Error(NotFound) when the file does not exist, Error(Io) for any
  // other refusal (permissions, a directory, mmap failing), naming the path.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Empty for a 0-byte file. Truncating the file while it is mapped makes
  // reads of the lost pages raise SIGBUS: checkpoints must not be rewritten
  // in place while a model is loading.
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lathe::weights
