// The layers of the source tree read one way (docs/adding-a-feature.md):
// core/ stands on nothing but the standard library; generator/ and runtime/
// stand on core/ and never on each other's upper layers (runtime/ never
// includes generator/); cli/ is the model executable's front end, which no
// library includes; runtime/text/ reaches nothing of a session or a device;
// and no file reaches itself through its includes.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Every project include ("dir/file.hpp") of every source under the layers.
std::map<std::string, std::vector<std::string>> include_graph() {
  std::map<std::string, std::vector<std::string>> graph;
  const fs::path root = LATHE_SOURCE_DIR;
  const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  for (const char* layer : {"core", "generator", "runtime", "cli"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
      const std::string name = fs::relative(entry.path(), root).generic_string();
      std::ifstream in(entry.path());
      std::string line;
      std::smatch m;
      auto& edges = graph[name];
      while (std::getline(in, line))
        if (std::regex_search(line, m, include) && fs::exists(root / m[1].str())) edges.push_back(m[1].str());
    }
  }
  return graph;
}

std::string layer_of(const std::string& file) { return file.substr(0, file.find('/')); }

}  // namespace

TEST_CASE("layering: core stands alone, the runtime never includes the generator, nothing includes cli/") {
  const auto graph = include_graph();
  REQUIRE(graph.size() > 50);
  // Which layers each layer may include.
  const std::map<std::string, std::set<std::string>> allowed = {
      {"core", {"core"}},
      {"runtime", {"core", "runtime"}},
      {"generator", {"core", "generator", "runtime"}},
      {"cli", {"core", "runtime", "cli"}},
  };
  for (const auto& [file, includes] : graph)
    for (const std::string& target : includes) {
      CAPTURE(file);
      CAPTURE(target);
      CHECK(allowed.at(layer_of(file)).count(layer_of(target)) == 1);
    }
}

namespace {

// The files under `folder` that reach no header of a session or a device
// (model/, vk/, generate/, serve/), through every header they reach, not
// only their own includes: how many there are.
int below_a_session(const std::string& folder) {
  const auto graph = include_graph();
  const std::vector<std::string> above = {"runtime/model/", "runtime/vk/", "runtime/generate/", "runtime/serve/"};
  int files = 0;
  for (const auto& [file, includes] : graph) {
    if (!file.starts_with(folder)) continue;
    ++files;
    std::set<std::string> seen;
    std::vector<std::string> todo(includes.begin(), includes.end());
    while (!todo.empty()) {
      const std::string target = todo.back();
      todo.pop_back();
      if (!seen.insert(target).second) continue;
      for (const std::string& prefix : above) {
        CAPTURE(file);
        CAPTURE(target);
        CHECK_FALSE(target.starts_with(prefix));
      }
      if (auto it = graph.find(target); it != graph.end())
        todo.insert(todo.end(), it->second.begin(), it->second.end());
    }
  }
  return files;
}

}  // namespace

TEST_CASE("layering: runtime/text/ stands below a session: it reaches nothing of model/, vk/, generate/, serve/") {
  // lathe_text (tokenizers, chat templates) is text without a device; what
  // drives a Session (the sampler and generate()) is runtime/generate/.
  CHECK(below_a_session("runtime/text/") > 30);
}

TEST_CASE("layering: runtime/image/ stands below a session too: decoding and preprocessing need no device") {
  CHECK(below_a_session("runtime/image/") == 4);
}

TEST_CASE("layering: runtime/grammar/ stands below a session: constrained decoding is host code") {
  CHECK(below_a_session("runtime/grammar/") >= 9);
}

TEST_CASE("layering: the include graph has no cycles") {
  const auto graph = include_graph();
  std::map<std::string, int> state;  // 0 unseen, 1 on the path, 2 done
  std::vector<std::string> path;
  std::string cycle;
  std::function<void(const std::string&)> visit = [&](const std::string& f) {
    state[f] = 1;
    path.push_back(f);
    auto it = graph.find(f);
    if (it != graph.end())
      for (const std::string& g : it->second) {
        if (!cycle.empty()) break;
        if (state[g] == 1) {
          for (const std::string& p : path) cycle += p + " -> ";
          cycle += g;
        } else if (state[g] == 0) {
          visit(g);
        }
      }
    path.pop_back();
    state[f] = 2;
  };
  for (const auto& [file, includes] : graph)
    if (state[file] == 0) visit(file);
  CHECK_MESSAGE(cycle.empty(), "an include cycle: " << cycle);
}
