// Where lathe keeps what it can remake: the Vulkan pipeline cache, the model
// builds of `lathe build` and `lathe run`.
#pragma once

#include <string>

namespace lathe {

// $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, else $HOME/.cache/lathe;
// empty when none of them is set (nowhere to keep anything).
std::string cache_dir();

}  // namespace lathe
