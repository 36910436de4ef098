#include "generator/driver/process.hpp"

#include <cerrno>
#include <cstring>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace lathe::driver {
namespace {

std::vector<char*> argv_of(const Command& command) {
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

std::vector<int> run_all(const std::vector<Command>& commands) {
  std::vector<pid_t> pids(commands.size(), -1);
  std::vector<int> status(commands.size(), 127);
  for (size_t i = 0; i < commands.size(); ++i) {
    std::vector<char*> argv = argv_of(commands[i]);
    if (posix_spawnp(&pids[i], argv[0], nullptr, nullptr, argv.data(), environ) != 0) pids[i] = -1;
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    if (pids[i] < 0) continue;
    int s = 0;
    while (waitpid(pids[i], &s, 0) < 0 && errno == EINTR) {
    }
    status[i] = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + (WIFSIGNALED(s) ? WTERMSIG(s) : 0);
  }
  return status;
}

std::string quote(const Command& command) {
  std::string out;
  for (const std::string& arg : command) {
    if (!out.empty()) out += ' ';
    if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$*?;&|<>()") == std::string::npos) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string exec(const Command& command) {
  std::vector<char*> argv = argv_of(command);
  execvp(argv[0], argv.data());
  return std::strerror(errno);
}

}  // namespace lathe::driver
