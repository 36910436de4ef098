// The generated build of a spec: gen (written to a directory) and check
// (its header compiled in process with Clang).
#include <iostream>
#include <string>

#include "generator/clang/check.hpp"
#include "generator/commands/commands.hpp"
#include "generator/commands/common.hpp"
#include "generator/emit/emit_cpp.hpp"

namespace lathe::tool {

int cmd_gen(const std::string& path, const std::string& draft, const std::string& out_dir, bool quiet, bool dump) {
  auto planned = load_planned(path, draft);
  if (!planned) return 1;
  write_build(*planned, path, out_dir, quiet, dump);
  return 0;
}

int cmd_check(const std::string& path, const std::string& draft, const std::string& root, const std::string& inject) {
  auto planned = load_planned(path, draft);
  if (!planned) return 1;
  const lathe::spec::Spec* spec = &planned->spec;
  lathe::clang::CheckOptions options;
  options.model_namespace = lathe::emit::model_namespace(spec->name);
  options.include_dirs = {root};
  options.extra_code = inject;
  if (planned->tower) {  // the tower's build, which the model header includes, its schedule instantiated too
    const lathe::spec::Spec tower = lathe::lower::tower_spec(*spec);
    options.headers.push_back({"tower.hpp", model_header(tower, *planned->tower, path, "tower.hpp")});
    options.extra_code = "template void lathe::models::" + lathe::emit::model_namespace(tower.name) +
                         "::forward<lathe::typed::Recorder>(lathe::typed::Recorder&);\n" + options.extra_code;
  }
  if (planned->draft) {  // the draft's build, which model.cpp includes beside the model's, its schedule instantiated too
    const Planned& d = *planned->draft;
    const std::string ns = lathe::emit::draft_namespace(d.spec.name);
    options.headers.push_back({"draft.hpp", model_header(d.spec, d.model, d.spec.file, "draft.hpp", ns)});
    options.extra_code = "#include \"draft.hpp\"\ntemplate void lathe::models::" + ns +
                         "::forward<lathe::typed::Recorder>(lathe::typed::Recorder&);\n" + options.extra_code;
  }
  const auto result = lathe::clang::check_generated(model_header(*spec, planned->model, path, options.header_name), options);
  std::cerr << result.format();
  if (!result.ok) {
    const int errors = result.errors();
    std::cerr << path << ": the generated code does not compile (" << errors << (errors == 1 ? " error)" : " errors)")
              << "\n";
    return 1;
  }
  std::cout << path << (draft.empty() ? "" : " with its draft " + draft) << ": ok (generated code compiles)\n";
  return 0;
}

}  // namespace lathe::tool
