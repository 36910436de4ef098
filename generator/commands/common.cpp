// What several of the `lathe` tool's commands share (common.hpp): a spec
// parsed, a spec planned, the generated header, the generated build written.
#include "generator/commands/common.hpp"

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "generator/clang/format.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/emit/emit_kernels.hpp"
#include "generator/lower/model_plan.hpp"
#include "generator/spec/diagnostics.hpp"
#include "generator/spec/parse.hpp"

namespace lathe::tool {

std::optional<lathe::spec::Spec> load_spec(const std::string& path) {
  lathe::spec::Diagnostics diagnostics(path);
  auto spec = lathe::spec::parse_spec_file(path, diagnostics);
  if (!spec) std::cerr << diagnostics.format();
  return spec;
}

std::string model_header(const lathe::spec::Spec& spec, const lathe::lower::ModelPlan& model, const std::string& path,
                         const std::string& header_name, const std::string& ns) {
  return lathe::clang::format_cpp(lathe::emit::emit_model_header(spec, model, path, header_name, ns), header_name);
}

namespace {

std::optional<Planned> load_one(const std::string& path) {
  auto spec = load_spec(path);
  if (!spec) return std::nullopt;
  lathe::spec::Diagnostics diagnostics(path);
  if (!lathe::emit::check_supported(*spec, diagnostics)) {
    std::cerr << diagnostics.format();
    return std::nullopt;
  }
  auto model = lathe::lower::plan_model(*spec, diagnostics);
  std::optional<lathe::lower::ModelPlan> tower;
  if (model && spec->vision.enabled) tower = lathe::lower::plan_tower(*spec, diagnostics);
  if (!model || (spec->vision.enabled && !tower)) {
    std::cerr << diagnostics.format();
    return std::nullopt;
  }
  return Planned{std::move(*spec), std::move(*model), std::move(tower), nullptr};
}

}  // namespace

std::optional<Planned> load_planned(const std::string& path, const std::string& draft_path) {
  auto planned = load_one(path);
  if (!planned || draft_path.empty()) return planned;
  auto draft = load_one(draft_path);
  if (!draft) return std::nullopt;
  lathe::spec::Diagnostics model_diagnostics(path), draft_diagnostics(draft_path);
  lathe::spec::validate_draft(planned->spec, draft->spec, model_diagnostics, draft_diagnostics);
  if (!model_diagnostics.empty() || !draft_diagnostics.empty()) {
    std::cerr << model_diagnostics.format() << draft_diagnostics.format();
    return std::nullopt;
  }
  planned->draft = std::make_unique<Planned>(std::move(*draft));
  return planned;
}

void write_build(const Planned& planned, const std::string& path, const std::string& out_dir, bool quiet, bool dump) {
  const lathe::spec::Spec* spec = &planned.spec;
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path dir(out_dir);
  const std::string header_path = (dir / "model.hpp").string();
  const std::string source_path = (dir / "model.cpp").string();
  const std::vector<lathe::emit::CompiledKernel> kernels = lathe::emit::compile_kernels(*spec, planned.model.plan);
  const std::string draft_ns = planned.draft ? lathe::emit::draft_namespace(planned.draft->spec.name) : "";
  std::vector<std::pair<std::string, std::string>> files = {
      {header_path, model_header(*spec, planned.model, path, header_path)},
      {source_path, lathe::clang::format_cpp(lathe::emit::emit_model_source(*spec, path, draft_ns), source_path)},
      {(dir / "kernels.cpp").string(), lathe::emit::emit_kernels_source(*spec, path, kernels)},
  };
  if (planned.tower) {
    // The tower's build beside the decoder's: its header, its kernels after the decoder's.
    const lathe::spec::Spec tower = lathe::lower::tower_spec(*spec);
    const std::string tower_path = (dir / "tower.hpp").string();
    files.push_back({tower_path, model_header(tower, *planned.tower, path, tower_path)});
    files[2].second += "\n" + lathe::emit::emit_kernels_source(
                                   tower, path, lathe::emit::compile_kernels(tower, planned.tower->plan));
  }
  std::vector<lathe::emit::CompiledKernel> draft_kernels;
  if (planned.draft) {
    // The draft's build beside the model's, in a namespace of its own (a
    // model may draft for itself): its header, its kernels after the others.
    const Planned& draft = *planned.draft;
    const std::string draft_path = (dir / "draft.hpp").string();
    draft_kernels = lathe::emit::compile_kernels(draft.spec, draft.model.plan);
    files.push_back({draft_path, model_header(draft.spec, draft.model, draft.spec.file, draft_path, draft_ns)});
    files[2].second +=
        "\n" + lathe::emit::emit_kernels_source(draft.spec, draft.spec.file, draft_kernels, draft_ns, "draft.hpp");
  }
  for (const auto& [file, text] : files) {
    const bool written = lathe::emit::write_if_changed(file, text);
    if (!quiet) std::cout << file << (written ? " (written)" : " (unchanged)") << "\n";
  }
  if (dump) {
    const std::string plan_path = (dir / "plan.dump").string();
    lathe::emit::write_if_changed(plan_path, lathe::lower::describe(planned.model));
    const std::string dump_path = (dir / "kernels.dump").string();
    lathe::emit::write_if_changed(dump_path, lathe::emit::dump_kernels(kernels));
    if (!quiet) std::cout << plan_path << "\n" << dump_path << "\n";
    if (planned.draft) {  // the draft's: draft-plan.dump, draft-kernels.dump
      const std::string draft_plan = (dir / "draft-plan.dump").string();
      lathe::emit::write_if_changed(draft_plan, lathe::lower::describe(planned.draft->model));
      const std::string draft_dump = (dir / "draft-kernels.dump").string();
      lathe::emit::write_if_changed(draft_dump, lathe::emit::dump_kernels(draft_kernels));
      if (!quiet) std::cout << draft_plan << "\n" << draft_dump << "\n";
    }
  }
}

}  // namespace lathe::tool
