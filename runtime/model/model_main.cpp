// The model-specific executable: the generic front end, linked with one
// generated model library.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "runtime/error.hpp"
#include "runtime/model/lowering.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/session.hpp"
#include "runtime/vk/device.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/safetensors.hpp"

namespace {

using lathe::Error;
using lathe::ErrorKind;

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
  const lathe::plan::Plan plan = lathe::plan::lower(m, schedule, false);
  std::map<std::string, int> kernels;
  for (const auto& d : plan.dispatches) kernels[d.kernel]++;
  std::cout << "plan         " << plan.dispatches.size() << " dispatches per decode step, " << plan.slot_widths.size()
            << " activation buffers\n";
  for (const auto& [name, n] : kernels) std::cout << "  " << n << " × " << name << "\n";
  return 0;
}

// Random weights in the manifest's dtypes, deterministic in the seed: for
// trying a build without a checkpoint (tests, benchmarks). Norm scales near 1.
int cmd_random_weights(const std::string& out, uint64_t seed, float scale) {
  const lathe::ModelInfo& m = lathe::model_info();
  std::vector<lathe::weights::TensorToWrite> tensors;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (const lathe::ManifestEntry& e : m.manifest) {
    const bool norm = !e.bias && (e.role == lathe::Role::AttnNorm || e.role == lathe::Role::MlpNorm ||
                                  e.role == lathe::Role::FinalNorm || e.role == lathe::Role::AttnPostNorm ||
                                  e.role == lathe::Role::MlpPostNorm || e.role == lathe::Role::QNorm ||
                                  e.role == lathe::Role::KNorm);
    std::vector<float> values(static_cast<size_t>(e.elements()));
    for (float& v : values) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
      const float uniform = static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
      v = (norm ? 1.0f : 0.0f) + scale * uniform;
    }
    lathe::weights::TensorToWrite t{std::string(e.name), e.dtype, {e.shape[0]}, {}};
    if (e.rank == 2) t.shape.push_back(e.shape[1]);
    t.data.resize(values.size() * lathe::weights::dtype_size(e.dtype));
    lathe::weights::convert(lathe::DType::F32, std::as_bytes(std::span(values)), e.dtype, t.data);
    tensors.push_back(std::move(t));
  }
  lathe::weights::write_safetensors(out, tensors, {{"format", "pt"}, {"lathe", "random weights"}});
  std::cerr << "wrote " << tensors.size() << " random tensors of " << m.name << " to " << out << "\n";
  return 0;
}

std::vector<int32_t> parse_tokens(const std::string& text) {
  std::vector<int32_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v < INT32_MIN || v > INT32_MAX)
      throw Error(ErrorKind::InvalidArgument, "--tokens: '" + item + "' is not a token id");
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) throw Error(ErrorKind::InvalidArgument, "--tokens: no token ids given");
  return out;
}

// The logits of every prompt position, then of `steps` greedy decode steps,
// as raw little-endian f32 rows of vocab values: for comparing lathe with any
// other implementation.
int cmd_logits(const std::string& weights, const std::string& tokens_text, int64_t steps, int64_t context,
               const std::string& device, const std::string& out_path) {
  const lathe::ModelInfo& m = lathe::model_info();
  const std::vector<int32_t> tokens = parse_tokens(tokens_text);
  lathe::vk::ContextOptions vk_options;
  vk_options.device = device;
  lathe::vk::Context vk(vk_options);
  lathe::SessionOptions options;
  options.all_logits = true;
  options.context = context;
  lathe::Session session(vk.device(), m, options);
  session.load_safetensors(weights);
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, out_path + ": cannot write");
  auto write = [&](const std::vector<float>& rows) {
    out.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
  };
  write(session.prefill(tokens));
  for (int64_t i = 0; i < steps; ++i) write(session.decode(session.argmax()));
  if (!out.flush()) throw Error(ErrorKind::Io, out_path + ": write failed");
  std::cerr << "wrote " << tokens.size() + static_cast<size_t>(steps) << " rows × " << m.vocab << " f32 logits to "
            << out_path << " (" << vk.device().info().name << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const lathe::ModelInfo& m = lathe::model_info();
  CLI::App app{std::string("lathe build of ") + std::string(m.name)};
  app.require_subcommand(1);
  auto* info = app.add_subcommand("info", "The model's configuration, manifest, schedule and dispatch plan");

  auto* random = app.add_subcommand("random-weights", "Write a safetensors file of random weights for this model");
  std::string random_out;
  uint64_t seed = 1;
  float scale = 0.05f;
  random->add_option("-o,--output", random_out, "The safetensors file to write")->required();
  random->add_option("--seed", seed, "Random seed");
  random->add_option("--scale", scale, "Values are uniform in [-scale, scale) (norm scales around 1)");

  auto* logits = app.add_subcommand("logits", "Write the logits of every position as raw little-endian f32 rows");
  std::string weights, tokens, out_path, device;
  int64_t steps = 0, context = 0;
  logits->add_option("-w,--weights", weights, "Safetensors checkpoint")->required()->check(CLI::ExistingFile);
  logits->add_option("-t,--tokens", tokens, "Prompt token ids, comma-separated")->required();
  logits->add_option("-n,--steps", steps, "Greedy decode steps after the prompt (their logits follow)")
      ->check(CLI::NonNegativeNumber);
  logits->add_option("-c,--context", context, "KV-cache positions (default: the spec's max_context)")
      ->check(CLI::NonNegativeNumber);
  logits->add_option("-d,--device", device, "Vulkan device: index or name part (default: LATHE_DEVICE, else the best)");
  logits->add_option("-o,--output", out_path, "Output file: (prompt + steps) rows × vocab f32")->required();

  CLI11_PARSE(app, argc, argv);
  try {
    if (*info) return cmd_info();
    if (*random) return cmd_random_weights(random_out, seed, scale);
    if (*logits) return cmd_logits(weights, tokens, steps, context, device, out_path);
  } catch (const Error& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
