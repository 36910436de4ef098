// What `--version` prints, for lathe and every model executable: the
// release, the commit it was built from, the Vulkan loader and each
// device's driver (what a bug report needs).
#pragma once

#include <string>
#include <string_view>

namespace lathe {

// "0.1.0", and the commit (git describe at configure time; "unknown" outside a checkout).
std::string_view version();
std::string_view commit();

// Lines of `program version (commit …)`, the Vulkan loader's version, and
// each device with its driver; a machine without a driver says so.
std::string version_text(std::string_view program);

}  // namespace lathe
