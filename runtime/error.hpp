// lathe::Error — the one exception type the runtime API throws.
// The kind is a status the caller can act on; the message names the file,
// tensor, device limit or option at fault.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace lathe {

enum class ErrorKind {
  InvalidArgument,  // an option or value the caller passed is wrong
  NotFound,         // a device, file or tensor that was asked for does not exist
  Unsupported,      // the device or build lacks a needed feature
  OutOfMemory,      // the model or context does not fit
  BadFile,          // a weights or spec file is malformed
  Io,               // the operating system refused a read or write
  Vulkan,           // a Vulkan call failed
};

std::string_view to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace lathe
