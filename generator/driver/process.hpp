// Child processes of `lathe build` and `lathe run`: the compiler, the linker,
// the model executable.
#pragma once

#include <string>
#include <vector>

namespace lathe::driver {

using Command = std::vector<std::string>;  // argv; [0] is looked up in PATH when it has no '/'

// Starts every command at once and waits for all of them; their output goes
// where lathe's goes. Returns each one's exit status (127: it did not start,
// 128 + n: killed by signal n).
std::vector<int> run_all(const std::vector<Command>& commands);

// The command as a shell would read it back (for --verbose and errors).
std::string quote(const Command& command);

// Replaces this process with `command` (the model executable of `lathe run`):
// signals, the terminal and the exit status are then the model's own. Returns
// only when the exec failed, with the reason.
std::string exec(const Command& command);

}  // namespace lathe::driver
