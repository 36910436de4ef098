// The model-specific executable: the generic front end, linked with one
// generated model library.
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>

#include "runtime/model/model_info.hpp"

namespace {

const char* op_name(lathe::typed::OpKind k) {
  using lathe::typed::OpKind;
  switch (k) {
    case OpKind::Embed: return "embed";
    case OpKind::PosEmbed: return "pos_embed";
    case OpKind::RMSNorm: return "rmsnorm";
    case OpKind::LayerNorm: return "layernorm";
    case OpKind::MatMul: return "matmul";
    case OpKind::Split: return "split";
    case OpKind::Rope: return "rope";
    case OpKind::Attention: return "attention";
    case OpKind::Act: return "activation";
    case OpKind::GatedAct: return "gated_activation";
    case OpKind::Add: return "add";
    case OpKind::Logits: return "logits";
  }
  return "?";
}

int cmd_info() {
  const lathe::ModelInfo& m = lathe::model_info();
  std::cout << "model        " << m.name << " (" << m.spec_file << ")\n"
            << "dims         hidden " << m.hidden << ", layers " << m.layers << ", heads " << m.heads << "/"
            << m.kv_heads << " × " << m.head_dim << ", intermediate " << m.intermediate << ", vocab " << m.vocab
            << ", max context " << m.max_context << "\n"
            << "parameters   " << m.total_params << " in " << m.manifest.size() << " tensors\n";
  const lathe::typed::Schedule schedule = m.schedule();
  std::map<std::string, int> counts;
  for (const auto& op : schedule.ops) counts[op_name(op.kind)]++;
  std::cout << "schedule     " << schedule.ops.size() << " ops:";
  for (const auto& [name, n] : counts) std::cout << " " << name << " " << n;
  std::cout << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{std::string("lathe build of ") + std::string(lathe::model_info().name)};
  app.require_subcommand(1);
  auto* info = app.add_subcommand("info", "The model's configuration, manifest and schedule");
  CLI11_PARSE(app, argc, argv);
  if (*info) return cmd_info();
  return 0;
}
