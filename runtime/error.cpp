#include "runtime/error.hpp"

namespace lathe {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::NotFound: return "not found";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::OutOfMemory: return "out of memory";
    case ErrorKind::BadFile: return "bad file";
    case ErrorKind::Io: return "i/o error";
    case ErrorKind::Vulkan: return "vulkan error";
  }
  return "error";
}

}  // namespace lathe
