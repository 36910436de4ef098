// `lathe import`: Hugging Face config.json → spec. Every shipped spec survives
// spec → config → spec; the published configs of each supported model type
// import to the spec models/ holds (or to the published parameter count);
// what a spec cannot say is an error naming the config key; a checkpoint
// beside the config must hold exactly the spec's parameters.
#include <doctest/doctest.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "generator/import/hf_export.hpp"
#include "generator/import/hf_import.hpp"
#include "generator/import/toml_doc.hpp"
#include "generator/spec/compare.hpp"
#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/safetensors.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::importer;
using namespace lathe::spec;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path source_dir() { return fs::path(LATHE_SOURCE_DIR); }

// A config.json kept under tests/data/import/.
json read_fixture(const std::string& file) {
  std::ifstream in(source_dir() / "tests" / "data" / "import" / file);
  REQUIRE_MESSAGE(in, file);
  return json::parse(in);
}

Spec load(const fs::path& path) {
  Diagnostics diag(path.string());
  auto spec = parse_spec_file(path.string(), diag);
  INFO(diag.format());
  REQUIRE(spec);
  return *spec;
}

Spec parse_text(const std::string& text) {
  Diagnostics diag("imported.toml");
  auto spec = parse_spec_string(text, "imported.toml", diag);
  INFO(diag.format());
  INFO(text);
  REQUIRE(spec);
  return *spec;
}

// Imports `config`, collecting warnings instead of printing them.
struct Imported {
  std::string text;
  Spec spec;
  std::vector<std::string> warnings;
};

// `directory`: the model's, where its tokenizer.json is.
Imported import_config(const json& config, const std::string& name = "", const std::string& directory = "") {
  Imported out;
  ImportOptions options;
  options.name = name;
  options.directory = directory;
  options.warn = [&](const std::string& line) { out.warnings.push_back(line); };
  out.text = import_hf_config(config, options).render();
  out.spec = parse_text(out.text);
  return out;
}

// The error text of importing `config` ("" when it imports).
std::string import_error(const json& config) {
  ImportOptions options;
  options.warn = [](const std::string&) {};
  try {
    import_hf_config(config, options);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A tensor of zeros to write into a checkpoint.
weights::TensorToWrite f32_zeros(const std::string& name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return weights::TensorToWrite{name, DType::F32, std::move(shape), std::vector<std::byte>(static_cast<size_t>(n) * 4)};
}

// import_hf of a directory, its warnings dropped.
ImportResult import_quietly(const fs::path& dir) {
  ImportOptions options;
  options.warn = [](const std::string&) {};
  return import_hf(dir.string(), options);
}

// The published config.json files (their architecture keys; the values as
// the Hugging Face repositories hold them).
const char* kSmolLM2 = R"({
  "_name_or_path": "HuggingFaceTB/SmolLM2-135M", "architectures": ["LlamaForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true,
  "vocab_size": 49152})";

const char* kLlama32_1B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

const char* kMistral7B = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})";

const char* kMixtral8x7B = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

const char* kQwen25_05B = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false, "use_sliding_window": false,
  "vocab_size": 151936})";

const char* kQwen15MoE = R"({
  "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21, "model_type": "qwen2_moe",
  "num_attention_heads": 16, "num_hidden_layers": 24, "num_key_value_heads": 16, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.36.0.dev0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936,
  "decoder_sparse_step": 1, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
  "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": false, "output_router_logits": false,
  "router_aux_loss_coef": 0.001})";

const char* kQwen3_06B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
  "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
  "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

const char* kGemma2B = R"({
  "architectures": ["GemmaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 2,
  "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu", "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 16384, "max_position_embeddings": 8192,
  "model_type": "gemma", "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1,
  "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000.0,
  "torch_dtype": "bfloat16", "transformers_version": "4.38.0.dev0", "use_cache": true, "vocab_size": 256000})";

const char* kGemma2_2B = R"({
  "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
  "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
  "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
  "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
  "transformers_version": "4.42.4", "use_cache": true, "vocab_size": 256000})";

const char* kGemma3_1B = R"({
  "architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
  "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
  "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
  "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144})";

const char* kPhi3Mini4k = R"({
  "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
  "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
  "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
  "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
  "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": true, "vocab_size": 32064})";

const char* kOlmo2_1B = R"({
  "architectures": ["Olmo2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "olmo2", "num_attention_heads": 16,
  "num_hidden_layers": 16, "num_key_value_heads": 16, "pad_token_id": 100277, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 500000, "tie_word_embeddings": false, "transformers_version": "4.48.3",
  "use_cache": true, "vocab_size": 100352})";

const char* kGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12,
  "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null, "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true, "summary_type": "cls_index", "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}}, "vocab_size": 50257})";

// EleutherAI/pythia-160m's config.json as the Hub serves it (GPTNeoXConfig
// keys of transformers 4.24; reconstructed from the Pythia model card's
// dimensions and the other Pythia sizes' files).
const char* kPythia160M = R"({
  "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
  "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
  "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 12, "num_hidden_layers": 12,
  "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": false, "torch_dtype": "float16",
  "transformers_version": "4.24.0", "use_cache": true, "use_parallel_residual": true, "vocab_size": 50304})";

// microsoft/phi-2's config.json (transformers 4.37), as quoted verbatim by
// several public projects.
const char* kPhi2 = R"({
  "_name_or_path": "microsoft/phi-2", "architectures": ["PhiForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 50256, "embd_pdrop": 0.0, "eos_token_id": 50256, "hidden_act": "gelu_new", "hidden_size": 2560,
  "initializer_range": 0.02, "intermediate_size": 10240, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
  "model_type": "phi", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
  "partial_rotary_factor": 0.4, "qk_layernorm": false, "resid_pdrop": 0.1, "rope_scaling": null,
  "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "float16", "transformers_version": "4.37.0",
  "use_cache": true, "vocab_size": 51200})";

// bigscience/bloom-560m's config.json (transformers 4.26), as quoted
// verbatim by public projects: no torch_dtype, no context length.
const char* kBloom560M = R"({
  "_name_or_path": "bigscience/bloom-560m", "apply_residual_connection_post_layernorm": false,
  "architectures": ["BloomForCausalLM"], "attention_dropout": 0.0, "attention_softmax_in_fp32": true,
  "bias_dropout_fusion": true, "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0, "hidden_size": 1024,
  "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": true, "model_type": "bloom",
  "n_head": 16, "n_inner": null, "n_layer": 24, "offset_alibi": 100, "pad_token_id": 3, "pretraining_tp": 1,
  "skip_bias_add": true, "skip_bias_add_qkv": false, "slow_but_exact": false, "transformers_version": "4.26.0",
  "unk_token_id": 0, "use_cache": true, "vocab_size": 250880})";

// tiiuae/falcon-7b's config.json (multi-query, one shared norm) and the
// new-decoder-architecture form of Falcon-40B (8 KV groups, ln_attn/ln_mlp).
const char* kFalcon7B = R"({
  "alibi": false, "apply_residual_connection_post_layernorm": false, "architectures": ["FalconForCausalLM"],
  "attention_dropout": 0.0, "bias": false, "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0,
  "hidden_size": 4544, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
  "multi_query": true, "new_decoder_architecture": false, "num_attention_heads": 71, "num_hidden_layers": 32,
  "parallel_attn": true, "torch_dtype": "bfloat16", "transformers_version": "4.27.4", "use_cache": true,
  "vocab_size": 65024})";
const char* kFalcon40B = R"({
  "alibi": false, "architectures": ["FalconForCausalLM"], "bias": false, "hidden_size": 8192,
  "layer_norm_epsilon": 1e-05, "model_type": "falcon", "new_decoder_architecture": true, "num_attention_heads": 128,
  "num_hidden_layers": 60, "num_kv_heads": 8, "parallel_attn": true, "torch_dtype": "bfloat16", "vocab_size": 65024})";

// EleutherAI/gpt-j-6b's config.json (the architecture keys).
const char* kGptJ6B = R"({
  "activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"], "bos_token_id": 50256,
  "embd_pdrop": 0.0, "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
  "model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_inner": null, "n_layer": 28, "n_positions": 2048,
  "resid_pdrop": 0.0, "rotary": true, "rotary_dim": 64, "tie_word_embeddings": false, "torch_dtype": "float32",
  "vocab_size": 50400})";

// mosaicml/mpt-7b's config.json (the architecture keys).
const char* kMpt7B = R"({
  "architectures": ["MPTForCausalLM"], "attn_config": {"alibi": true, "alibi_bias_max": 8, "attn_impl": "torch",
  "attn_pdrop": 0, "attn_type": "multihead_attention", "attn_uses_sequence_id": false, "clip_qkv": null,
  "prefix_lm": false, "qk_ln": false, "softmax_scale": null}, "d_model": 4096, "emb_pdrop": 0,
  "embedding_fraction": 1.0, "expansion_ratio": 4, "init_device": "cpu", "learned_pos_emb": true,
  "logit_scale": null, "max_seq_len": 2048, "model_type": "mpt", "n_heads": 32, "n_layers": 32, "no_bias": true,
  "norm_type": "low_precision_layernorm", "resid_pdrop": 0, "torch_dtype": "bfloat16", "use_cache": false,
  "verbose": 0, "vocab_size": 50432})";

// Qwen/Qwen3-30B-A3B's config.json (transformers 4.51).
const char* kQwen3_30B_A3B = R"({"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
 "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
 "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
 "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
 "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
 "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
 "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
 "vocab_size": 151936})";

// Encoders: google-bert/bert-base-uncased, sentence-transformers/all-MiniLM-L6-v2,
// FacebookAI/roberta-base and FacebookAI/xlm-roberta-base.
const char* kBertBase = R"({"architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
 "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
 "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
 "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0,
 "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0", "type_vocab_size": 2, "use_cache": true,
 "vocab_size": 30522})";
const char* kMiniLM = R"({"_name_or_path": "nreimers/MiniLM-L6-H384-uncased", "architectures": ["BertModel"],
 "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
 "hidden_size": 384, "initializer_range": 0.02, "intermediate_size": 1536, "layer_norm_eps": 1e-12,
 "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 6,
 "pad_token_id": 0, "position_embedding_type": "absolute", "transformers_version": "4.8.2", "type_vocab_size": 2,
 "use_cache": true, "vocab_size": 30522})";
const char* kRobertaBase = R"({"architectures": ["RobertaForMaskedLM"], "attention_probs_dropout_prob": 0.1,
 "bos_token_id": 0, "eos_token_id": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
 "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05, "max_position_embeddings": 514,
 "model_type": "roberta", "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 1, "type_vocab_size": 1,
 "vocab_size": 50265})";
const char* kXlmRobertaBase = R"({"architectures": ["XLMRobertaForMaskedLM"], "attention_probs_dropout_prob": 0.1,
 "bos_token_id": 0, "eos_token_id": 2, "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
 "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
 "max_position_embeddings": 514, "model_type": "xlm-roberta", "num_attention_heads": 12, "num_hidden_layers": 12,
 "output_past": true, "pad_token_id": 1, "position_embedding_type": "absolute", "transformers_version": "4.17.0.dev0",
 "type_vocab_size": 1, "use_cache": true, "vocab_size": 250002})";

// google-t5/t5-small's config.json as a T5EncoderModel's (its architectures
// changed: the whole model is an encoder-decoder).
const char* kT5SmallEncoder = R"({"architectures": ["T5EncoderModel"], "d_ff": 2048, "d_kv": 64, "d_model": 512,
 "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
 "is_encoder_decoder": true, "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512, "num_heads": 8,
 "num_layers": 6, "output_past": true, "pad_token_id": 0, "relative_attention_num_buckets": 32, "vocab_size": 32128})";

// answerdotai/ModernBERT-base's config.json.
const char* kModernBertBase = R"({"architectures": ["ModernBertForMaskedLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 50281,
 "classifier_activation": "gelu", "classifier_bias": false, "classifier_dropout": 0.0, "classifier_pooling": "mean",
 "cls_token_id": 50281, "decoder_bias": true, "deterministic_flash_attn": false, "embedding_dropout": 0.0,
 "eos_token_id": 50282, "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "gradient_checkpointing": false,
 "hidden_activation": "gelu", "hidden_size": 768, "initializer_cutoff_factor": 2.0, "initializer_range": 0.02,
 "intermediate_size": 1152, "layer_norm_eps": 1e-05, "local_attention": 128, "local_rope_theta": 10000.0,
 "max_position_embeddings": 8192, "mlp_bias": false, "mlp_dropout": 0.0, "model_type": "modernbert", "norm_bias": false,
 "norm_eps": 1e-05, "num_attention_heads": 12, "num_hidden_layers": 22, "pad_token_id": 50283, "position_embedding_type": "absolute",
 "sep_token_id": 50282, "tie_word_embeddings": true, "torch_dtype": "float32", "transformers_version": "4.47.0.dev0",
 "vocab_size": 50368})";

// state-spaces/mamba-130m-hf's config.json (tie_word_embeddings absent: true).
const char* kMamba130M = R"({"architectures": ["MambaForCausalLM"], "bos_token_id": 0, "conv_kernel": 4, "eos_token_id": 0,
 "expand": 2, "fused_add_norm": true, "hidden_act": "silu", "hidden_size": 768, "initializer_range": 0.1,
 "intermediate_size": 1536, "layer_norm_epsilon": 1e-05, "model_type": "mamba", "n_layer": 24, "num_hidden_layers": 24,
 "pad_token_id": 0, "pad_vocab_size_multiple": 8, "rescale_prenorm_residual": false, "residual_in_fp32": true,
 "rms_norm": true, "state_size": 16, "time_step_floor": 0.0001, "time_step_init_scheme": "random", "time_step_max": 0.1,
 "time_step_min": 0.001, "time_step_rank": 48, "time_step_scale": 1.0, "torch_dtype": "float32",
 "transformers_version": "4.39.0.dev0", "use_bias": false, "use_cache": true, "use_conv_bias": true, "vocab_size": 50280})";

struct Published {
  const char* model_type;
  const char* config;
  int64_t params;           // the sum of the published checkpoint's tensor elements
  const char* shipped;      // models/<file> describing the same model, or null
};

// Qwen1.5-MoE-A2.7B's count is the manifest's (14.3B, as published); the
// others are the counts spec_models_test.cpp checks, or the published
// checkpoints' (gemma-2b 2,506,172,416; gemma-3-1b 999,885,952; Qwen3-0.6B
// 596,049,920).
const Published kPublishedConfigs[] = {
    {"llama", kSmolLM2, 134'515'008, "smollm2-135m.toml"},
    {"llama", kLlama32_1B, 1'235'814'400, "llama-3.2-1b.toml"},
    {"mistral", kMistral7B, 7'241'732'096, "mistral-7b-v0.1.toml"},
    {"mixtral", kMixtral8x7B, 46'702'792'704, "mixtral-8x7b.toml"},
    {"qwen2", kQwen25_05B, 494'032'768, "qwen2.5-0.5b.toml"},
    {"qwen2_moe", kQwen15MoE, 14'315'784'192, "qwen1.5-moe-a2.7b.toml"},  // the model card's 14.3B
    {"qwen3", kQwen3_06B, 596'049'920, "qwen3-0.6b.toml"},
    {"gemma", kGemma2B, 2'506'172'416, nullptr},
    {"gemma2", kGemma2_2B, 2'614'341'888, "gemma-2-2b.toml"},
    {"gemma3_text", kGemma3_1B, 999'885'952, "gemma-3-1b.toml"},
    {"phi3", kPhi3Mini4k, 3'821'079'552, "phi-3-mini-4k.toml"},
    {"olmo2", kOlmo2_1B, 1'484'916'736, "olmo-2-1b.toml"},
    {"gpt2", kGpt2, 124'439'808, "gpt2.toml"},
    // The model cards' totals: Pythia-160M 162,322,944 (untied embed_out);
    // Phi-2 2,779,683,840 (its safetensors, the LM head's bias included);
    // BLOOM-560M 559,214,592 (tied: no lm_head). The others are the
    // manifest's (Falcon-7B 6,921,720,704, its model card's 7B; Falcon-40B
    // 41,303,293,952; GPT-J 6,050,882,784; MPT-7B 6,649,286,656).
    {"gpt_neox", kPythia160M, 162'322'944, "pythia-160m.toml"},
    {"phi", kPhi2, 2'779'683'840, "phi-2.toml"},
    {"bloom", kBloom560M, 559'214'592, "bloom-560m.toml"},
    {"falcon", kFalcon7B, 6'921'720'704, nullptr},
    {"falcon", kFalcon40B, 41'303'293'952, nullptr},
    {"gptj", kGptJ6B, 6'050'882'784, nullptr},
    {"mpt", kMpt7B, 6'649'286'656, nullptr},
    {"qwen3_moe", kQwen3_30B_A3B, 30'532'122'624, "qwen3-30b-a3b.toml"},  // the model card's 30.5B
    // Encoders: the published base models' counts less their poolers (a
    // hidden × hidden dense with its bias, 590,592 at 768 wide and 147,840
    // at 384, which sentence embeddings do not use): BertModel 109,482,240,
    // all-MiniLM-L6-v2 22,713,216, RobertaModel 124,645,632, XLM-R 278,043,648.
    {"bert", kBertBase, 108'891'648, "bert-base-uncased.toml"},
    {"bert", kMiniLM, 22'565'376, "all-minilm-l6-v2.toml"},
    {"roberta", kRobertaBase, 124'055'040, nullptr},
    {"xlm-roberta", kXlmRobertaBase, 277'453'056, nullptr},
    {"t5", kT5SmallEncoder, 35'330'816, "t5-small-encoder.toml"},
    // State-space: mamba-130m-hf's model card count (tied LM head).
    {"mamba", kMamba130M, 129'135'360, "mamba-130m.toml"},
    // ModernBertForMaskedLM's 149,655,232 less its head (dense, norm, decoder bias).
    {"modernbert", kModernBertBase, 149'014'272, "modernbert-base.toml"},
};

// A value of the rendered TOML, by "table.key".
const TomlValue* value_of(const TomlDoc& doc, const std::string& path) {
  const size_t dot = path.rfind('.');
  const TomlTable* t = doc.find(path.substr(0, dot));
  return t ? t->get(path.substr(dot + 1)) : nullptr;
}

std::string text_of(const TomlDoc& doc, const std::string& path) {
  const TomlValue* v = value_of(doc, path);
  return v ? v->text() : "(absent)";
}

// Imports a mutated config (`what` says how): a spec that parses back
// (counted in `imported`), or an ImportError naming the config (`refused`);
// anything else fails the test.
void import_or_refuse(const json& config, const std::string& what, int& imported, int& refused) {
  ImportOptions options;
  options.warn = [](const std::string&) {};
  try {
    parse_text(import_hf_config(config, options).render());
    ++imported;
  } catch (const ImportError& e) {
    CHECK(std::string(e.what()).rfind("config.json: ", 0) == 0);
    ++refused;
  } catch (const std::exception& e) {
    FAIL_CHECK(what << ": " << e.what());
  }
}

double parse_float(const std::string& text) {
  const toml::table t = toml::parse("x = " + text);
  return *t["x"].value<double>();
}

}  // namespace

TEST_SUITE("import") {

TEST_CASE("toml_doc: floats print so that they parse back exactly") {
  CHECK(toml_float(1e-5) == "1e-5");
  CHECK(toml_float(1e-6) == "1e-6");
  CHECK(toml_float(500000.0) == "500000.0");
  CHECK(toml_float(10000.0) == "10000.0");
  CHECK(toml_float(1e6) == "1000000.0");
  CHECK(toml_float(0.0625) == "0.0625");
  CHECK(toml_float(32.0) == "32.0");
  CHECK(toml_float(-2.5) == "-2.5");
  for (const double v : {1e-5, 1e-6, 1.0 / 3.0, 0.1, 2.0 / 3.0 * 1e-7, 123456789.125, 1e20, 6.02214076e23, 1e-300,
                         0.041666666666666664, 1.0 / std::sqrt(256.0), 1.0 / std::sqrt(80.0)}) {
    CAPTURE(v);
    CHECK(parse_float(toml_float(v)) == v);
  }
}

TEST_CASE("toml_doc: ordered tables, aligned comments, comment-only tables, escapes") {
  TomlDoc doc;
  doc.header("A header line.");
  doc.table("dims").set("hidden", 576, "hidden_size").set("layers", int64_t{30});
  doc.table("attention").note("sliding_window = 32768 is inactive.");
  doc.table("norm").set("eps", 1e-5, "rms_norm_eps").set("placement", "branch_output", "post_*_layernorm");
  doc.table("position.scaling").set("kind", "llama3");
  doc.table("weights").set("ignore", std::vector<std::string>{"h.{layer}.attn.bias", "a\"b\\c"});
  doc.table("attention.x").set("window_pattern", std::vector<bool>{true, false});
  doc.table("dims").set("hidden", 577, "changed");  // replaced in place
  doc.table("empty");
  CHECK(doc.render() ==
        "# A header line.\n"
        "\n"
        "[dims]\n"
        "hidden = 577          # changed\n"
        "layers = 30\n"
        "\n"
        "# sliding_window = 32768 is inactive.\n"
        "\n"
        "[norm]\n"
        "eps = 1e-5            # rms_norm_eps\n"
        "placement = \"branch_output\" # post_*_layernorm\n"
        "\n"
        "[position.scaling]\n"
        "kind = \"llama3\"\n"
        "\n"
        "[weights]\n"
        "ignore = [\"h.{layer}.attn.bias\", \"a\\\"b\\\\c\"]\n"
        "\n"
        "[attention.x]\n"
        "window_pattern = [true, false]\n");
  CHECK(doc.find("norm")->erase("eps"));
  CHECK_FALSE(doc.find("norm")->has("eps"));
  // A string literal is a string, never a bool.
  CHECK(TomlValue("pre").text() == "\"pre\"");
  CHECK(TomlValue(true).text() == "true");
  CHECK(toml_string("tab\there\x01") == "\"tab\\there\\u0001\"");
}

TEST_CASE("every shipped spec survives spec → config.json → spec") {
  int count = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(source_dir() / "models")) {
    if (e.path().extension() != ".toml") continue;
    CAPTURE(e.path().filename().string());
    const Spec original = load(e.path());
    json config;
    REQUIRE_NOTHROW(config = hf_config_from_spec(original));
    Imported back = import_config(config, original.name);
    INFO(config.dump(2));
    INFO(back.text);
    back.spec.cache = original.cache;  // the KV cache's dtype is a build choice no config states
    back.spec.pooling = original.pooling;  // sentence-transformers' modules.json states it, beside config.json
    const std::vector<std::string> differences = spec_differences(original, back.spec);
    for (const std::string& d : differences) CHECK_MESSAGE(false, d);
    CHECK(back.warnings.empty());
    CHECK(back.spec.name == original.name);
    ++count;
  }
  // Every file of models/, llava-1.5-7b the latest (a llava config: its
  // decoder as text_config, its CLIP tower as vision_config).
  CHECK(count == 35);
}

TEST_CASE("published configs import to the shipped specs and to the published parameter counts") {
  for (const Published& p : kPublishedConfigs) {
    CAPTURE(p.model_type);
    CAPTURE(p.shipped ? p.shipped : "");
    const json config = json::parse(p.config);
    REQUIRE(config["model_type"] == p.model_type);
    const Imported imported = import_config(config);
    INFO(imported.text);
    CHECK(make_report(imported.spec).total_params == p.params);
    if (p.shipped) {
      const Spec shipped = load(source_dir() / "models" / p.shipped);
      for (const std::string& d : spec_differences(shipped, imported.spec)) {
        // The shipped specs say bf16 for checkpoints whose config says
        // float32 (Gemma 2 2B) or nothing (OLMo 2, GPT-2: float32 then);
        // the vectors' dtype follows.
        if (d.rfind("weights.dtype:", 0) == 0 || d.rfind("weights.vector_dtype:", 0) == 0) continue;
        // all-MiniLM-L6-v2's pooling is in its modules.json, not its config.json.
        if (d.rfind("pooling.", 0) == 0) continue;
        CHECK_MESSAGE(false, d);
      }
    }
  }
}

// The encoder-decoders' config.json files (tests/data/import/: google-t5/t5-small,
// google/flan-t5-small and facebook/bart-base, their task settings trimmed).
// The counts are the manifests'. transformers' num_parameters() gives
// 60,506,624, 76,961,152 and 139,420,416: it counts the shared embedding
// once (the spec stores it once; T5 v1.0's and BART's heads are tied to it)
// and leaves out buffers, of which the manifest holds BART's
// final_logits_bias ([1, 50265]): 139,420,416 + 50,265.
struct PublishedFile {
  const char* file;
  int64_t params;
  const char* shipped;
};
const PublishedFile kEncoderDecoderConfigs[] = {
    {"t5-small.json", 60'506'624, "t5-small.toml"},
    {"flan-t5-small.json", 76'961'152, "flan-t5-small.toml"},
    {"bart-base.json", 139'470'681, "bart-base.toml"},
};

TEST_CASE("encoder-decoder configs import to the shipped specs and their published counts") {
  for (const PublishedFile& p : kEncoderDecoderConfigs) {
    CAPTURE(p.file);
    const Imported imported = import_config(read_fixture(p.file));
    INFO(imported.text);
    CHECK(imported.warnings.empty());
    CHECK(imported.spec.encoder_decoder());
    CHECK(make_report(imported.spec).total_params == p.params);
    CHECK(build_manifest(imported.spec).total_elements() == p.params);
    const Spec shipped = load(source_dir() / "models" / p.shipped);
    for (const std::string& d : spec_differences(shipped, imported.spec)) CHECK_MESSAGE(false, d);
  }
}

// DeepSeek-V2-Lite's and DeepSeek-V3's config.json (tests/data/import/):
// their published counts (15.7B, 671B: the sums of the checkpoints' tensors,
// V3's multi-token-prediction layer left out), the latent cache of 576
// values a token and layer, and every routing key.
TEST_CASE("DeepSeek configs: latent attention, DeepSeek's MoE and YaRN, the published counts") {
  SUBCASE("DeepSeek-V2-Lite: no query latent, softmax greedy routing, mscale 0.707 twice") {
    const Imported imported = import_config(read_fixture("deepseek-v2-lite.json"));
    INFO(imported.text);
    CHECK(imported.warnings.empty());
    const Spec& s = imported.spec;
    REQUIRE(s.mla.enabled);
    CHECK(s.mla.q_lora_rank == 0);
    CHECK(s.mla.kv_lora_rank == 512);
    CHECK(s.dims.kv_heads == 1);
    CHECK(s.dims.head_dim == 576);
    CHECK(s.position.rotary_dim == 64);
    CHECK(s.position.pairing == spec::RopePairing::Interleaved);
    // m(40, 0.707)² / sqrt(192): the release's softmax_scale; the attention factor m/m = 1.
    const double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
    CHECK(*s.attention.scale == doctest::Approx(m * m / std::sqrt(192.0)).epsilon(1e-12));
    CHECK(*s.position.scaling.attention_factor == doctest::Approx(1.0));
    CHECK(s.moe.experts == 64);
    CHECK(s.moe.top_k == 6);
    CHECK(s.moe.shared_experts * s.moe.shared_intermediate == 2 * 1408);
    CHECK(s.moe.dense_layers == std::vector<int64_t>{0});
    CHECK(s.moe.groups == 1);
    CHECK(!s.moe.norm_topk_prob);
    const Report r = make_report(s);
    CHECK(r.total_params == 15'706'484'224);
    CHECK(r.kv_bytes_per_token == 27 * 576 * 2);  // the latent and the rotary key, f16, no V
    const Spec shipped = load(source_dir() / "models" / "deepseek-v2-lite.toml");
    for (const std::string& d : spec_differences(shipped, s)) CHECK_MESSAGE(false, d);
  }
  SUBCASE("DeepSeek-V3 (its bf16 form): a query latent, sigmoid scores, noaux_tc groups, 2.5 scaling") {
    json config = read_fixture("deepseek-v3.json");
    config.erase("quantization_config");
    const Imported imported = import_config(config);
    INFO(imported.text);
    const Spec& s = imported.spec;
    CHECK(s.mla.q_lora_rank == 1536);
    CHECK(s.moe.scoring == spec::MoeScoring::Sigmoid);
    CHECK(s.moe.correction_bias);
    CHECK(s.moe.groups == 8);
    CHECK(s.moe.topk_groups == 4);
    CHECK(s.moe.group_score == spec::GroupScore::Top2Sum);
    CHECK(s.moe.norm_topk_prob);
    CHECK(s.moe.routed_scaling_factor == 2.5);
    CHECK(s.moe.dense_layers == std::vector<int64_t>{0, 1, 2});
    CHECK(*s.attention.scale == doctest::Approx(1.0 / std::sqrt(192.0) * std::pow(0.1 * std::log(40.0) + 1.0, 2)));
    const Report r = make_report(s);
    CHECK(r.total_params == 671'026'419'200);
    CHECK(r.active_params == 37'552'297'472);
    const Spec shipped = load(source_dir() / "models" / "deepseek-v3.toml");
    for (const std::string& d : spec_differences(shipped, s)) CHECK_MESSAGE(false, d);
  }
  SUBCASE("DeepSeek-V2: group-limited routing by each group's best expert; renormalized weights are not scaled") {
    json config = read_fixture("deepseek-v2-lite.json");
    config["n_group"] = 8;
    config["topk_group"] = 3;
    config["topk_method"] = "group_limited_greedy";
    config["norm_topk_prob"] = true;
    config["routed_scaling_factor"] = 16.0;
    config["first_k_dense_replace"] = 2;
    config["moe_layer_freq"] = 2;
    const Imported imported = import_config(config);
    const Spec& s = imported.spec;
    CHECK(s.moe.group_score == spec::GroupScore::Max);
    CHECK(s.moe.groups == 8);
    CHECK(s.moe.topk_groups == 3);
    CHECK(s.moe.routed_scaling_factor == 1.0);
    // Layers 0, 1 and every odd one dense.
    for (int64_t l = 0; l < 27; ++l) CHECK(s.moe.sparse(l) == (l >= 2 && l % 2 == 0));
    CHECK(hf_config_from_spec(s)["moe_layer_freq"] == 2);
  }
}

TEST_CASE("imported keys: T5 v1.0 and v1.1, BART and mBART") {
  SUBCASE("t5-small: a tied head read at d_model^-0.5, each stack's bias table") {
    const Imported t5 = import_config(read_fixture("t5-small.json"));
    const Spec& s = t5.spec;
    CHECK(s.stack == Stack::EncoderDecoder);
    CHECK(s.decoder_start == 0);
    CHECK(s.dims.layers == 6);
    CHECK(s.dims.encoder_layers == 6);
    CHECK(s.embedding.tied);
    CHECK(s.output.scale == std::pow(512.0, -0.5));  // Python's d_model**-0.5
    CHECK(s.attention.scale == 1.0);
    CHECK(s.mlp.activation == Activation::ReLU);
    CHECK_FALSE(s.mlp.gated);
    CHECK(s.weights.ignore ==
          std::vector<std::string>{"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"});
    const Manifest m = build_manifest(s);
    const auto has = [&](const std::string& name) {
      return std::any_of(m.tensors.begin(), m.tensors.end(), [&](const TensorSpec& t) { return t.name == name; });
    };
    CHECK(has("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
    CHECK(has("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
    CHECK(has("decoder.block.5.layer.1.EncDecAttention.k.weight"));
    CHECK(has("encoder.block.5.layer.1.DenseReluDense.wi.weight"));
    CHECK(has("decoder.final_layer_norm.weight"));
    CHECK_FALSE(has("lm_head.weight"));
  }
  SUBCASE("flan-t5-small: gated-gelu, an untied lm_head, wi_1 in both stacks") {
    const Imported flan = import_config(read_fixture("flan-t5-small.json"));
    const Spec& s = flan.spec;
    CHECK(s.mlp.activation == Activation::GeluTanh);
    CHECK(s.mlp.gated);
    CHECK_FALSE(s.embedding.tied);
    CHECK(s.output.scale == 1.0);
    CHECK(s.weights.names.at(Role::Up) == "decoder.block.{layer}.layer.2.DenseReluDense.wi_1");
    CHECK(s.weights.encoder_names.at(Role::Up) == "encoder.block.{layer}.layer.1.DenseReluDense.wi_1");
    CHECK(text_of(import_hf_config(read_fixture("flan-t5-small.json"), {}), "embedding.tied") == "false");
  }
  SUBCASE("T5 with fewer decoder layers than encoder layers") {
    json config = read_fixture("flan-t5-small.json");
    config["num_decoder_layers"] = 3;
    const Spec s = import_config(config).spec;
    CHECK(s.dims.layers == 3);
    CHECK(s.dims.encoder_layers == 8);
    const Manifest m = build_manifest(s);
    int64_t decoder_blocks = 0, encoder_blocks = 0;
    for (const TensorSpec& t : m.tensors) {
      if (t.name.find(".layer.0.SelfAttention.q.weight") == std::string::npos) continue;
      (t.name.rfind("decoder.", 0) == 0 ? decoder_blocks : encoder_blocks) += 1;
    }
    CHECK(decoder_blocks == 3);
    CHECK(encoder_blocks == 8);
  }
  SUBCASE("bart-base: post-norm, positions from row 2, final_logits_bias") {
    const Imported bart = import_config(read_fixture("bart-base.json"));
    const Spec& s = bart.spec;
    CHECK(s.stack == Stack::EncoderDecoder);
    CHECK(s.decoder_start == 2);
    CHECK(s.norm.placement == NormPlacement::Post);
    CHECK_FALSE(s.norm.final_norm);
    CHECK(s.position.kind == PositionKind::Learned);
    CHECK(s.position.offset == 2);
    CHECK(s.position.table_size == 1026);
    CHECK(s.dims.max_context == 1024);
    CHECK(s.mlp.activation == Activation::GeluErf);
    CHECK(s.embedding.tied);
    CHECK(s.embedding.norm);
    CHECK(s.embedding.scale == 1.0);
    CHECK(s.output.bias);
    const Manifest m = build_manifest(s);
    const auto shape_of = [&](const std::string& name) {
      for (const TensorSpec& t : m.tensors)
        if (t.name == name) return t.shape;
      return std::vector<int64_t>{};
    };
    CHECK(shape_of("final_logits_bias") == std::vector<int64_t>{50265});
    CHECK(shape_of("model.encoder.embed_positions.weight") == std::vector<int64_t>{1026, 768});
    CHECK(shape_of("model.decoder.layers.5.encoder_attn.out_proj.bias") == std::vector<int64_t>{768});
    CHECK(shape_of("model.encoder.layernorm_embedding.bias") == std::vector<int64_t>{768});
    CHECK(shape_of("model.encoder.layer_norm.weight").empty());  // BART's stacks end at their last block's norm
    // scale_embedding: the token embeddings times sqrt(d_model).
    json scaled = read_fixture("bart-base.json");
    scaled["scale_embedding"] = true;
    CHECK(import_config(scaled).spec.embedding.scale == std::sqrt(768.0));
  }
  SUBCASE("mBART: pre-norm blocks, a final norm ending each stack; it exports back as mbart") {
    json config = read_fixture("bart-base.json");
    config["model_type"] = "mbart";
    config["architectures"] = json::array({"MBartForConditionalGeneration"});
    config["normalize_before"] = true;
    config["add_final_layer_norm"] = true;
    config["scale_embedding"] = true;
    const Spec s = import_config(config).spec;
    CHECK(s.norm.placement == NormPlacement::Pre);
    CHECK(s.norm.final_norm);
    const Manifest m = build_manifest(s);
    for (const char* name : {"model.encoder.layer_norm.weight", "model.decoder.layer_norm.bias",
                             "model.decoder.layers.0.encoder_attn_layer_norm.weight"})
      CHECK_MESSAGE(std::any_of(m.tensors.begin(), m.tensors.end(), [&](const TensorSpec& t) { return t.name == name; }),
                    name);
    const json exported = hf_config_from_spec(s);
    CHECK(exported["model_type"] == "mbart");
    CHECK(exported["scale_embedding"] == true);
  }
}

// A checkpoint as transformers saves an encoder-decoder: every stack's
// embed_tokens and a tied lm_head are the shared table again, and
// generation_config.json names the decoder's first token.
TEST_CASE("an encoder-decoder checkpoint: the shared table's copies are ignored, generation_config.json starts the decoder") {
  for (const char* fixture : {"t5-small.json", "bart-base.json"}) {
    CAPTURE(fixture);
    json config = read_fixture(fixture);
    // Tiny widths, the same architecture.
    if (config["model_type"] == "t5") {
      config.update({{"d_model", 16}, {"d_kv", 4}, {"num_heads", 4}, {"d_ff", 32}, {"num_layers", 2}, {"vocab_size", 40}});
      config["num_decoder_layers"] = 1;
    } else {
      config.update({{"d_model", 16}, {"encoder_attention_heads", 4}, {"decoder_attention_heads", 4},
                     {"encoder_ffn_dim", 32}, {"decoder_ffn_dim", 32}, {"encoder_layers", 2}, {"decoder_layers", 1},
                     {"vocab_size", 40}, {"max_position_embeddings", 24}});
    }
    const Spec spec = import_config(config).spec;
    const Manifest manifest = build_manifest(spec);
    std::vector<weights::TensorToWrite> tensors;
    for (const TensorSpec& t : manifest.tensors) tensors.push_back(f32_zeros(t.name, t.shape));
    for (const std::string& copy : spec.weights.ignore) tensors.push_back(f32_zeros(copy, {40, 16}));
    test::TempDir dir("lathe-import-encdec");
    test::write_file(dir.file("config.json"), config.dump(2));
    test::write_file(dir.file("generation_config.json"), R"({"decoder_start_token_id": 7, "eos_token_id": 1})");
    weights::write_safetensors(dir.file("model.safetensors"), tensors);
    const ImportResult r = import_quietly(dir.dir);
    REQUIRE(r.checkpoint);
    CHECK(r.checkpoint->checkpoint_elements == manifest.total_elements());
    CHECK(r.checkpoint->ignored_tensors == 3);
    CHECK(r.spec.decoder_start == 7);
    CHECK(contains(r.text, "decoder_start = 7"));
    CHECK(contains(r.text, "# generation_config.json: decoder_start_token_id"));
  }
}

// models/demo/config.json makes the demo's directory a Hugging Face
// checkpoint (lathe import, lathe quantize read it): it must say the model
// models/demo.toml says.
TEST_CASE("the demo model's config.json imports to models/demo.toml") {
  std::ifstream f(source_dir() / "models" / "demo" / "config.json");
  REQUIRE(f);
  const Imported imported = import_config(json::parse(f), "demo");
  INFO(imported.text);
  const Spec shipped = load(source_dir() / "models" / "demo.toml");
  Spec back = imported.spec;
  back.cache = shipped.cache;  // f32 in the spec, so decoding follows the reference closely: a build choice
  for (const std::string& d : spec_differences(shipped, back)) CHECK_MESSAGE(false, d);
  CHECK(imported.warnings.empty());
  CHECK(make_report(back).total_params == 5'508'352);
}

TEST_CASE("imported keys: each model type's family-defining fields and comments") {
  SUBCASE("llama: Llama 3.2 1B, llama3 scaling") {
    const TomlDoc doc = import_hf_config(json::parse(kLlama32_1B), {});
    CHECK(text_of(doc, "dims.hidden") == "2048");
    CHECK(text_of(doc, "dims.head_dim") == "(absent)");  // 64 = 2048 / 32
    CHECK(text_of(doc, "position.theta") == "500000.0");
    CHECK(text_of(doc, "position.scaling.kind") == "\"llama3\"");
    CHECK(text_of(doc, "position.scaling.factor") == "32.0");
    CHECK(text_of(doc, "position.scaling.low_freq_factor") == "1.0");
    CHECK(text_of(doc, "position.scaling.high_freq_factor") == "4.0");
    CHECK(text_of(doc, "position.scaling.original_max_context") == "8192");
    CHECK(text_of(doc, "weights.dtype") == "\"bf16\"");
    CHECK(text_of(doc, "embedding.tied") == "true");
    const std::string text = doc.render();
    CHECK(contains(text, "original_max_context = 8192 # rope_scaling.original_max_position_embeddings\n"));
    CHECK(contains(text, "heads = 32            # num_attention_heads (head_dim = 64 = hidden / heads)\n"));
  }
  SUBCASE("mistral: a window on every layer, copied verbatim") {
    const TomlDoc doc = import_hf_config(json::parse(kMistral7B), {});
    CHECK(text_of(doc, "attention.sliding_window") == "4096");
    CHECK(text_of(doc, "attention.window_pattern") == "(absent)");
    CHECK(text_of(doc, "norm.eps") == "1e-5");
    // Without the key, MistralConfig's default window applies.
    json config = json::parse(kMistral7B);
    config.erase("sliding_window");
    const TomlDoc defaulted = import_hf_config(config, {});
    CHECK(text_of(defaulted, "attention.sliding_window") == "4096");
    CHECK(contains(defaulted.render(), "sliding_window (MistralConfig default; not in config.json)"));
    config["sliding_window"] = nullptr;
    CHECK(text_of(import_hf_config(config, {}), "attention.sliding_window") == "(absent)");
  }
  SUBCASE("mixtral: experts, renormalized top-k") {
    const TomlDoc doc = import_hf_config(json::parse(kMixtral8x7B), {});
    CHECK(text_of(doc, "moe.experts") == "8");
    CHECK(text_of(doc, "moe.top_k") == "2");
    CHECK(text_of(doc, "moe.norm_topk_prob") == "true");
    CHECK(text_of(doc, "attention.sliding_window") == "(absent)");
  }
  SUBCASE("qwen2: q/k/v biases, the inactive window noted") {
    const Imported q = import_config(json::parse(kQwen25_05B));
    CHECK(q.spec.attention.q_bias);
    CHECK(q.spec.attention.v_bias);
    CHECK_FALSE(q.spec.attention.o_bias);
    CHECK(q.spec.attention.sliding_window == 0);
    CHECK(contains(q.text, "# sliding_window = 32768 is inactive: use_sliding_window = false.\n"));
    // use_mrope is not an architecture key lathe knows: a warning names it.
    REQUIRE(q.warnings.size() == 1);
    CHECK(contains(q.warnings[0], "use_mrope"));
    CHECK(contains(q.warnings[0], "config.json: warning:"));
    // With use_sliding_window, layers from max_window_layers on are windowed.
    json config = json::parse(kQwen25_05B);
    config["use_sliding_window"] = true;
    config["sliding_window"] = 4096;
    config["max_window_layers"] = 21;
    const Imported windowed = import_config(config);
    CHECK(windowed.spec.attention.sliding_window == 4096);
    for (int64_t i = 0; i < 24; ++i) CHECK(windowed.spec.attention.windowed(i) == (i >= 21));
  }
  SUBCASE("qwen2_moe: shared expert with its gate, Qwen2-MoE's tensor names") {
    const Imported q = import_config(json::parse(kQwen15MoE));
    CHECK(q.spec.moe.experts == 60);
    CHECK(q.spec.moe.top_k == 4);
    CHECK_FALSE(q.spec.moe.norm_topk_prob);
    CHECK(q.spec.moe.expert_intermediate == 1408);
    CHECK(q.spec.moe.shared_experts == 1);
    CHECK(q.spec.moe.shared_intermediate == 5632);
    CHECK(q.spec.moe.shared_expert_gate);
    CHECK(q.spec.attention.q_bias);
    CHECK_FALSE(q.spec.attention.o_bias);
    CHECK(q.spec.weights.names.at(Role::Router) == "model.layers.{layer}.mlp.gate");
    CHECK(q.spec.weights.names.at(Role::ExpertGate) == "model.layers.{layer}.mlp.experts.{expert}.gate_proj");
    CHECK(q.warnings.empty());
    // Dense layers among the sparse ones: mlp_only_layers and decoder_sparse_step.
    json sparse = json::parse(kQwen15MoE);
    sparse["mlp_only_layers"] = {0, 1};
    sparse["decoder_sparse_step"] = 2;
    const Imported d = import_config(sparse);
    CHECK(d.spec.moe.dense_layers == std::vector<int64_t>{0, 1});
    CHECK(d.spec.moe.sparse_step == 2);
    CHECK(!d.spec.moe.sparse(0));
    CHECK(!d.spec.moe.sparse(2));
    CHECK(d.spec.moe.sparse(3));
    CHECK(spec_differences(d.spec, import_config(hf_config_from_spec(d.spec), d.spec.name).spec).empty());
    sparse["mlp_only_layers"] = {0, 99};
    CHECK(contains(import_error(sparse), "mlp_only_layers = [0,99]"));
  }
  SUBCASE("qwen3: per-head qk-norm, explicit head_dim") {
    const Imported q = import_config(json::parse(kQwen3_06B));
    CHECK(q.spec.attention.qk_norm == QKNorm::PerHead);
    CHECK(q.spec.dims.head_dim == 128);
    CHECK(q.spec.dims.head_dim_explicit);
    CHECK(q.spec.embedding.tied);
    CHECK(q.warnings.empty());
  }
  SUBCASE("gemma: (1 + w) norms, sqrt(hidden) embeddings, tanh GeGLU whatever hidden_act says") {
    const Imported g = import_config(json::parse(kGemma2B));
    CHECK(g.spec.norm.unit_offset);
    CHECK(g.spec.norm.placement == NormPlacement::Pre);
    CHECK(g.spec.embedding.scale_sqrt_hidden);
    CHECK(g.spec.embedding.tied);  // GemmaConfig default
    CHECK(g.spec.mlp.activation == Activation::GeluTanh);
    CHECK(g.spec.dims.kv_heads == 1);
    CHECK(contains(g.text, "tied = true           # tie_word_embeddings (GemmaConfig default; not in config.json)"));
    json legacy = json::parse(kGemma2B);
    legacy.erase("hidden_activation");  // the first published config: hidden_act "gelu" only
    const Imported l = import_config(legacy);
    CHECK(l.spec.mlp.activation == Activation::GeluTanh);
    REQUIRE(l.warnings.size() == 1);
    CHECK(contains(l.warnings[0], "hidden_act = \"gelu\" is ignored"));
  }
  SUBCASE("gemma2: sandwich norms, scalar, softcaps, alternating window") {
    const TomlDoc doc = import_hf_config(json::parse(kGemma2_2B), {});
    CHECK(text_of(doc, "norm.placement") == "\"sandwich\"");
    CHECK(text_of(doc, "attention.query_pre_attn_scalar") == "256");
    CHECK(text_of(doc, "attention.softcap") == "50.0");
    CHECK(text_of(doc, "output.softcap") == "30.0");
    CHECK(text_of(doc, "attention.window_pattern") == "[true, false]");
    CHECK(text_of(doc, "embedding.scale") == "\"sqrt_hidden\"");
    CHECK(text_of(doc, "weights.dtype") == "\"f32\"");
  }
  SUBCASE("gemma3_text: 5 local : 1 global, local RoPE base, per-head qk-norm") {
    const Imported g = import_config(json::parse(kGemma3_1B));
    CHECK(g.spec.attention.sliding_window == 512);
    CHECK(g.spec.attention.window_pattern == std::vector<bool>{true, true, true, true, true, false});
    CHECK(g.spec.position.theta == 1e6);
    REQUIRE(g.spec.position.local_theta);
    CHECK(*g.spec.position.local_theta == 10000.0);
    CHECK(g.spec.attention.qk_norm == QKNorm::PerHead);
    CHECK(g.spec.attention.softcap == 0);
    CHECK(g.spec.output.softcap == 0);
    CHECK(g.warnings.empty());
    // transformers 5's form: layer_types and rope_parameters per layer type.
    json v5 = json::parse(kGemma3_1B);
    for (const char* k : {"rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern"}) v5.erase(k);
    v5["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
                             {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
    json types = json::array();
    for (int i = 0; i < 26; ++i) types.push_back((i + 1) % 6 ? "sliding_attention" : "full_attention");
    v5["layer_types"] = types;
    const Imported g5 = import_config(v5);
    CHECK(spec_differences(g.spec, g5.spec).empty());
    // Gemma 3 4B and up scale only the global layers' RoPE: position.scaling
    // with local_theta, whose windowed layers rotate unscaled.
    json scaled = json::parse(kGemma3_1B);
    scaled["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
    const Imported g4 = import_config(scaled);
    CHECK(g4.spec.position.scaling.kind == spec::RopeScaling::Linear);
    CHECK(g4.spec.position.scaling.factor == 8.0);
    REQUIRE(g4.spec.position.local_theta);
    CHECK(*g4.spec.position.local_theta == 10000.0);
  }
  SUBCASE("phi3: fused qkv and gate_up") {
    const TomlDoc doc = import_hf_config(json::parse(kPhi3Mini4k), {});
    CHECK(text_of(doc, "weights.fused_qkv") == "true");
    CHECK(text_of(doc, "mlp.fused_gate_up") == "\"gate_up\"");
    CHECK(text_of(doc, "attention.sliding_window") == "2047");
    json partial = json::parse(kPhi3Mini4k);
    partial["partial_rotary_factor"] = 0.75;
    CHECK(import_config(partial).spec.position.rotary_dim == 72);  // int(96 * 0.75)
  }
  SUBCASE("olmo2: norms on the branch outputs, whole-projection qk-norm") {
    const Imported o = import_config(json::parse(kOlmo2_1B));
    CHECK(o.spec.norm.placement == NormPlacement::BranchOutput);
    CHECK(o.spec.attention.qk_norm == QKNorm::Whole);
    CHECK(o.spec.norm.eps == 1e-6);
    CHECK(o.spec.weights.dtype == DType::F32);  // no torch_dtype
    CHECK(contains(o.text, "torch_dtype not in config.json"));
  }
  SUBCASE("gpt2: Conv1D layout, fused c_attn, mask buffers ignored") {
    const Imported g = import_config(json::parse(kGpt2));
    CHECK(g.spec.weights.layout == Layout::InOut);
    CHECK(g.spec.weights.fused_qkv);
    CHECK(g.spec.weights.ignore == std::vector<std::string>{"h.{layer}.attn.bias", "h.{layer}.attn.masked_bias"});
    CHECK(g.spec.position.kind == PositionKind::Learned);
    CHECK(g.spec.dims.intermediate == 3072);
    CHECK(contains(g.text, "intermediate = 3072   # 4 * n_embd (n_inner not in config.json)"));
    CHECK(g.warnings.empty());
    json unscaled = json::parse(kGpt2);
    unscaled["scale_attn_weights"] = false;
    REQUIRE(import_config(unscaled).spec.attention.scale);
    CHECK(*import_config(unscaled).spec.attention.scale == 1.0);
  }
}

TEST_CASE("imported keys: GPT-NeoX, Phi, GPT-J, Falcon, BLOOM and MPT") {
  SUBCASE("gpt_neox: two norms in parallel, per-head fused q/k/v, a quarter of each head rotated") {
    const Spec s = import_config(json::parse(kPythia160M)).spec;
    CHECK(s.norm.placement == NormPlacement::Parallel);
    CHECK_FALSE(s.norm.parallel_shared);
    CHECK(s.weights.qkv_layout == QkvLayout::PerHead);
    CHECK(s.position.rotary_dim == 16);
    CHECK(s.mlp.activation == Activation::GeluErf);
    CHECK(s.weights.names.at(Role::LmHead) == "embed_out");
    json sequential = json::parse(kPythia160M);
    sequential["use_parallel_residual"] = false;
    CHECK(import_config(sequential).spec.norm.placement == NormPlacement::Pre);
    json v5 = json::parse(kPythia160M);  // transformers 5 moves rotary_pct and the base into rope_parameters
    v5.erase("rotary_pct");
    v5.erase("rotary_emb_base");
    v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
    CHECK(spec_differences(import_config(json::parse(kPythia160M)).spec, import_config(v5).spec).empty());
  }
  SUBCASE("phi: one shared norm, a biased LM head") {
    const Spec s = import_config(json::parse(kPhi2)).spec;
    CHECK(s.norm.parallel_shared);
    CHECK(s.output.bias);
    CHECK(s.position.rotary_dim == 32);
    CHECK(s.mlp.activation == Activation::GeluTanh);
  }
  SUBCASE("gptj: interleaved pairs on rotary_dim dims, no q/k/v biases") {
    const Spec s = import_config(json::parse(kGptJ6B)).spec;
    CHECK(s.position.pairing == RopePairing::Interleaved);
    CHECK(s.position.rotary_dim == 64);
    CHECK(s.dims.intermediate == 4 * 4096);
    CHECK_FALSE(s.attention.q_bias);
    CHECK(s.output.bias);
    CHECK(s.weights.ignore.size() == 2);
  }
  SUBCASE("falcon: multi-query q | k | v blocks, or grouped per KV head with two norms") {
    const Spec seven = import_config(json::parse(kFalcon7B)).spec;
    CHECK(seven.dims.kv_heads == 1);
    CHECK(seven.weights.qkv_layout == QkvLayout::Blocks);
    CHECK(seven.norm.parallel_shared);
    CHECK(seven.embedding.tied);
    CHECK(seven.weights.names.at(Role::AttnNorm) == "transformer.h.{layer}.input_layernorm");
    const Spec forty = import_config(json::parse(kFalcon40B)).spec;
    CHECK(forty.dims.kv_heads == 8);
    CHECK(forty.weights.qkv_layout == QkvLayout::Grouped);
    CHECK_FALSE(forty.norm.parallel_shared);
    CHECK(forty.weights.names.at(Role::MlpNorm) == "transformer.h.{layer}.ln_mlp");
    json sequential = json::parse(kFalcon7B);
    sequential["parallel_attn"] = false;
    const Spec pre = import_config(sequential).spec;
    CHECK(pre.norm.placement == NormPlacement::Pre);
    CHECK(pre.weights.names.at(Role::MlpNorm) == "transformer.h.{layer}.post_attention_layernorm");
  }
  SUBCASE("bloom: ALiBi, the embedding LayerNorm, 2048 positions when no key says") {
    const Imported b = import_config(json::parse(kBloom560M));
    CHECK(b.spec.position.kind == PositionKind::Alibi);
    CHECK(b.spec.embedding.norm);
    CHECK(b.spec.dims.max_context == 2048);
    CHECK(b.warnings.empty());
    json aliases = json::parse(kBloom560M);  // BloomConfig's other spellings
    aliases.erase("hidden_size");
    aliases["n_embed"] = 1024;
    aliases.erase("n_head");
    aliases["num_attention_heads"] = 16;
    CHECK(spec_differences(b.spec, import_config(aliases).spec).empty());
  }
  SUBCASE("qwen3_moe: per-head q/k norms, 128 experts, no shared expert") {
    const Spec s = import_config(json::parse(kQwen3_30B_A3B)).spec;
    CHECK(s.moe.experts == 128);
    CHECK(s.moe.top_k == 8);
    CHECK(s.moe.norm_topk_prob);
    CHECK(s.moe.shared_experts == 0);
    CHECK(s.attention.qk_norm == QKNorm::PerHead);
    CHECK(s.dims.head_dim == 128);
    CHECK(s.weights.names.at(Role::ExpertUp) == "model.layers.{layer}.mlp.experts.{expert}.up_proj");
  }
  SUBCASE("mpt: ALiBi, no biases, norms without biases") {
    const Spec s = import_config(json::parse(kMpt7B)).spec;
    CHECK(s.position.kind == PositionKind::Alibi);
    CHECK_FALSE(s.norm.bias);
    CHECK_FALSE(s.attention.q_bias);
    CHECK_FALSE(s.mlp.bias);
    CHECK(s.mlp.activation == Activation::GeluErf);
    CHECK(s.dims.intermediate == 4 * 4096);
  }
}

TEST_CASE("rope_scaling variants and transformers 5's rope_parameters") {
  json config = json::parse(kSmolLM2);
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  Spec s = import_config(config).spec;
  CHECK(s.position.scaling.kind == RopeScaling::Linear);
  CHECK(s.position.scaling.factor == 2.0);

  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  s = import_config(config).spec;
  CHECK(s.position.scaling.kind == RopeScaling::DynamicNtk);
  CHECK(s.position.scaling.factor == 4.0);
  // transformers scales past max_position_embeddings; the spec reaches factor times it.
  const int64_t trained = config["max_position_embeddings"].get<int64_t>();
  CHECK(s.position.scaling.original_max_context == trained);
  CHECK(s.dims.max_context == 4 * trained);
  // Exported, the trained context is max_position_embeddings again, and it imports back to the spec.
  const json exported = hf_config_from_spec(s);
  CHECK(exported["max_position_embeddings"] == trained);
  CHECK(exported["rope_scaling"]["rope_type"] == "dynamic");
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 1.0}};
  CHECK(contains(import_error(config), "dynamic NTK needs a factor above 1"));

  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 2048},
                            {"beta_fast", 16.0}, {"attention_factor", 1.25}};
  s = import_config(config).spec;
  CHECK(s.position.scaling.kind == RopeScaling::Yarn);
  CHECK(s.position.scaling.original_max_context == 2048);
  CHECK(s.position.scaling.beta_fast == 16.0);
  CHECK(s.position.scaling.beta_slow == 1.0);
  CHECK(*s.position.scaling.attention_factor == 1.25);

  // DeepSeek's mscale: alone it leaves transformers' default attention
  // factor; with mscale_all_dim the factor is their ratio.
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"mscale", 0.707}};
  s = import_config(config).spec;
  CHECK(s.position.scaling.mscale == 0.707);
  CHECK_FALSE(s.position.scaling.attention_factor.has_value());  // 0.1·ln(factor) + 1 by default
  config["rope_scaling"]["mscale_all_dim"] = 1.0;
  s = import_config(config).spec;
  CHECK(*s.position.scaling.attention_factor ==
        doctest::Approx((0.1 * 0.707 * std::log(4.0) + 1.0) / (0.1 * std::log(4.0) + 1.0)));
  CHECK_FALSE(s.attention.scale.has_value());  // the squared mscale is latent attention's

  // transformers 5: one rope_parameters object instead of rope_theta + rope_scaling.
  json v5 = json::parse(kLlama32_1B);
  const json scaling = v5["rope_scaling"];
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = scaling;
  v5["rope_parameters"]["rope_theta"] = 500000.0;
  CHECK(spec_differences(import_config(json::parse(kLlama32_1B)).spec, import_config(v5).spec).empty());
}

// mamba2-130m as transformers' Mamba2Config writes it (time_step_limit [0.0,
// Infinity], Python's bare token): the shipped spec, its count, the round trip.
TEST_CASE("Mamba-2 configs: mamba2-130m, the dt limits, widths that do not split") {
  const fs::path fixture = source_dir() / "tests" / "data" / "import" / "mamba2-130m.json";
  std::vector<std::string> warnings;
  ImportOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  const ImportResult r = import_hf(fixture.string(), options);
  CHECK(warnings.empty());
  const Spec& s = r.spec;
  CHECK(s.ssm.kind == spec::SsmKind::Mamba2);
  CHECK(s.ssm.heads == 24);
  CHECK(s.ssm.head_dim == 64);
  CHECK(s.ssm.groups == 1);
  CHECK(s.ssm.d_state == 128);
  CHECK(s.ssm.dt_min == 0.0);
  CHECK(std::isinf(s.ssm.dt_max));
  CHECK(make_report(s).total_params == 128'989'632);
  const Spec shipped = load(source_dir() / "models" / "mamba2-130m.toml");
  for (const std::string& d : spec_differences(shipped, s)) CHECK_MESSAGE(false, d);
  // Back to a config and in again: the same spec.
  for (const std::string& d : spec_differences(s, import_config(hf_config_from_spec(s), s.name).spec))
    CHECK_MESSAGE(false, d);

  json config;
  {
    std::ifstream in(fixture);
    std::stringstream text;
    text << in.rdbuf();
    std::string body = text.str();
    body.replace(body.find("Infinity"), 8, "100.0");
    config = json::parse(body);
  }
  SUBCASE("finite limits become dt_min and dt_max, and go back out") {
    config["time_step_limit"] = {0.001, 100.0};
    const Imported limited = import_config(config, "limited");
    CHECK(limited.spec.ssm.dt_min == 0.001);
    CHECK(limited.spec.ssm.dt_max == 100.0);
    CHECK(spec_differences(limited.spec, import_config(hf_config_from_spec(limited.spec), "limited").spec).empty());
  }
  SUBCASE("heads that do not split d_inner, groups that do not split the heads, a limit upside down") {
    config["num_heads"] = 25;
    CHECK(contains(import_error(config), "num_heads (25) × head_dim (64) is not expand × hidden_size = 1536"));
    config["num_heads"] = 24;
    config["n_groups"] = 5;
    CHECK(contains(import_error(config), "num_heads (24) is not a multiple of n_groups (5)"));
    config["n_groups"] = 1;
    config["time_step_limit"] = {1.0, 0.5};
    CHECK(contains(import_error(config), "time_step_limit"));
  }
}

// Bamba-9B's config.json: the shipped hybrid spec, its count, the errors.
TEST_CASE("Bamba configs: attention layers by index, the mamba_* mixer, half-rotated heads") {
  const json config = read_fixture("bamba-9b.json");
  const Imported imported = import_config(config, "bamba-9b");
  INFO(imported.text);
  CHECK(imported.warnings.empty());
  const Spec& s = imported.spec;
  CHECK(s.ssm.kind == spec::SsmKind::Mamba2);
  CHECK(s.ssm.attention_layers == std::vector<int64_t>{9, 18, 27});
  CHECK(s.ssm.heads == 128);
  CHECK(s.position.rotary_dim == 64);
  CHECK(s.weights.preset == "hf-bamba");
  CHECK(make_report(s).total_params == 9'780'235'392);
  Spec shipped = load(source_dir() / "models" / "bamba-9b.toml");
  for (const std::string& d : spec_differences(shipped, s)) CHECK_MESSAGE(false, d);

  json bad = config;
  bad["mamba_d_head"] = "auto";  // BambaConfig's default: d_inner / heads
  CHECK(import_config(bad, "auto").spec.ssm.head_dim == 64);
  bad["attn_layer_indices"] = {9, 32};
  CHECK(contains(import_error(bad), "attn_layer_indices = [9,32]: expected layer numbers from 0 to num_hidden_layers - 1 (31)"));
  bad.erase("attn_layer_indices");
  CHECK(contains(import_error(bad), "a Bamba model without attention layers is a Mamba-2 model"));
  bad = config;
  bad["mamba_n_heads"] = 100;
  CHECK(contains(import_error(bad), "mamba_n_heads (100) × mamba_d_head (64) is not expand × hidden_size = 8192"));
}

// Python's json writes float("inf") and float("nan") as bare tokens (Mamba-2's
// time_step_limit = [0.0, Infinity]): config.json files that hold them import;
// one in a key the spec reads is named with its token, and the words inside
// strings stay words.
TEST_CASE("config.json with Python's bare Infinity and NaN tokens") {
  test::TempDir dir("lathe-import-nonfinite");
  std::string text = kSmolLM2;
  text.insert(text.rfind('}'), R"(, "time_step_limit": [0.0, Infinity], "floor": -Infinity,
    "note": "NaN and Infinity in a string", "nested": {"x": [NaN, [Infinity]]})");
  test::write_file(dir.file("config.json"), text);
  std::vector<std::string> warnings;
  ImportOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  const ImportResult r = import_hf(dir.dir.string(), options);
  CHECK(r.spec.dims.hidden == 576);
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], "keys not read (the spec may be missing what they change): floor, nested, note, time_step_limit"));

  std::string bad = kSmolLM2;
  const size_t eps = bad.find("\"rms_norm_eps\": ");
  REQUIRE(eps != std::string::npos);
  bad.replace(eps, bad.find(',', eps) - eps, "\"rms_norm_eps\": NaN");
  test::write_file(dir.file("config.json"), bad);
  try {
    import_hf(dir.dir.string(), options);
    FAIL("imported");
  } catch (const ImportError& e) {
    CHECK(contains(e.what(), "rms_norm_eps = NaN: expected a number"));
  }
}

TEST_CASE("what a spec cannot say is an error naming the config key and value") {
  SUBCASE("an unknown model_type names it and the supported ones") {
    const std::string e = import_error(json::parse(R"({"model_type": "xlnet", "d_model": 768})"));
    CHECK(e == "config.json: model_type \"xlnet\" is not supported; supported model types: llama, mistral, mixtral, "
               "qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2, gemma3_text, phi3, olmo2, gpt2, gpt_neox, phi, gptj, "
               "falcon, bloom, mpt, bert, roberta, xlm-roberta, t5, modernbert, bart, mbart, mamba, mamba2, bamba, deepseek_v2, "
               "deepseek_v3, llava, mistral3, gemma3, mllama");
  }
  SUBCASE("DeepSeek: a quantized checkpoint, biased attention, an unknown routing method") {
    json v3 = read_fixture("deepseek-v3.json");
    CHECK(contains(import_error(v3), "quantization_config (quant_method \"fp8\"): quantized checkpoints are not imported"));
    v3.erase("quantization_config");
    v3["attention_bias"] = true;
    v3["topk_method"] = "aux_free";
    const std::string e = import_error(v3);
    CHECK(contains(e, "attention_bias = true: latent attention's projections have no biases in the spec"));
    CHECK(contains(e, "topk_method = \"aux_free\": the spec routes by greedy, group_limited_greedy (V2) or noaux_tc (V3)"));
    // Routing and widths a spec would refuse: named by their config keys, not left to the spec's rules.
    v3["attention_bias"] = false;
    v3["topk_method"] = "noaux_tc";
    v3["n_group"] = 2;
    v3["topk_group"] = 4;
    v3["kv_lora_rank"] = 500;
    const std::string f = import_error(v3);
    CHECK(contains(f, "topk_group (4) is larger than n_group (2)"));
    CHECK(contains(f, "kv_lora_rank + qk_rope_head_dim (564) is not a multiple of 8: the latent cache's rows"));
  }
  SUBCASE("T5: a task head, a decoder table too small for its exact distances, an unknown activation") {
    json config = json::parse(kT5SmallEncoder);
    config["architectures"] = json::array({"T5ForQuestionAnswering"});
    CHECK(contains(import_error(config), "config.json: architectures [\"T5ForQuestionAnswering\"]: a "
                                         "T5ForConditionalGeneration (encoder and decoder) or a T5EncoderModel"));
    // 16 buckets: the encoder's table has 4 exact distances, the decoder's causal one 8.
    config = read_fixture("t5-small.json");
    config["relative_attention_num_buckets"] = 16;
    config["relative_attention_max_distance"] = 8;
    CHECK(contains(import_error(config), "config.json: relative_attention_max_distance = 8: not above the 8 exact "
                                         "distances of relative_attention_num_buckets = 16 in the decoder's causal table"));
    config["architectures"] = json::array({"T5EncoderModel"});
    CHECK(import_error(config).empty());
    config = read_fixture("t5-small.json");
    config["decoder_start_token_id"] = 32128;
    CHECK(contains(import_error(config), "config.json: decoder_start_token_id = 32128: outside the vocabulary of 32128 tokens"));
    config = json::parse(kT5SmallEncoder);
    config["feed_forward_proj"] = "gated-swishy";
    CHECK(contains(import_error(config), "feed_forward_proj = \"gated-swishy\": unknown activation"));
  }
  SUBCASE("BART: stacks of different widths, mBART's norms, legacy keys that contradict the model") {
    json config = read_fixture("bart-base.json");
    config["decoder_attention_heads"] = 16;
    CHECK(contains(import_error(config), "config.json: decoder_attention_heads = 16: differs from encoder_attention_heads "
                                         "= 12; the spec's stacks share dims.heads"));
    config = read_fixture("bart-base.json");
    config["decoder_ffn_dim"] = 4096;
    CHECK(contains(import_error(config), "config.json: decoder_ffn_dim = 4096: differs from encoder_ffn_dim = 3072"));
    config = read_fixture("bart-base.json");
    config["normalize_before"] = true;
    CHECK(contains(import_error(config), "config.json: normalize_before = true: BartModel normalizes after each "
                                         "residual add; pre-norm blocks with final norms are mBART's (model_type \"mbart\")"));
    config = read_fixture("bart-base.json");
    config["static_position_embeddings"] = true;
    CHECK(contains(import_error(config), "config.json: static_position_embeddings = true: BartModel learns its position table"));
    config = read_fixture("bart-base.json");
    config["extra_pos_embeddings"] = 0;
    CHECK(contains(import_error(config), "config.json: extra_pos_embeddings = 0: BartLearnedPositionalEmbedding offsets"));
    config = read_fixture("bart-base.json");
    config["architectures"] = json::array({"BartForSequenceClassification"});
    CHECK(contains(import_error(config), "config.json: architectures [\"BartForSequenceClassification\"]: a "
                                         "BartForConditionalGeneration or BartModel imports"));
    // mBART: no class default for the decoder's first token (a language code per checkpoint).
    config = read_fixture("bart-base.json");
    config["model_type"] = "mbart";
    config["architectures"] = json::array({"MBartForConditionalGeneration"});
    config.erase("decoder_start_token_id");
    config["normalize_before"] = true;
    config["add_final_layer_norm"] = true;
    CHECK(contains(import_error(config), "config.json: decoder_start_token_id is not set (here or in "
                                         "generation_config.json): MBart's decoder needs the token it starts from"));
    config["normalize_before"] = false;
    CHECK(contains(import_error(config), "config.json: normalize_before = false: MBartModel normalizes before each branch"));
  }
  SUBCASE("MPT: q/k LayerNorms, clamping, other ALiBi slopes, biases, logit scale") {
    json config = json::parse(kMpt7B);
    config["attn_config"]["qk_ln"] = true;
    CHECK(contains(import_error(config), "config.json: attn_config.qk_ln = true"));
    config = json::parse(kMpt7B);
    config["attn_config"]["clip_qkv"] = 8;
    CHECK(contains(import_error(config), "config.json: attn_config.clip_qkv = 8"));
    config = json::parse(kMpt7B);
    config["attn_config"]["alibi_bias_max"] = 16;
    CHECK(contains(import_error(config), "config.json: attn_config.alibi_bias_max = 16"));
    config = json::parse(kMpt7B);
    config["attn_config"]["alibi"] = false;
    CHECK(contains(import_error(config), "config.json: attn_config.alibi = false"));
    config = json::parse(kMpt7B);
    config["no_bias"] = false;
    CHECK(contains(import_error(config), "config.json: no_bias = false"));
    config = json::parse(kMpt7B);
    config["logit_scale"] = 0.5;
    CHECK(contains(import_error(config), "config.json: logit_scale = 0.5"));
  }
  SUBCASE("Falcon's ALiBi, BLOOM's post-norm residual, Phi's q/k LayerNorms") {
    json falcon = json::parse(kFalcon7B);
    falcon["alibi"] = true;
    CHECK(contains(import_error(falcon), "config.json: alibi = true"));
    json bloom = json::parse(kBloom560M);
    bloom["apply_residual_connection_post_layernorm"] = true;
    CHECK(contains(import_error(bloom), "config.json: apply_residual_connection_post_layernorm = true"));
    json phi = json::parse(kPhi2);
    phi["qk_layernorm"] = true;
    CHECK(contains(import_error(phi), "config.json: qk_layernorm = true"));
    json neox = json::parse(kPythia160M);
    neox["rotary_pct"] = 0.3;  // 19.2 of 64 dims: 19, odd
    CHECK(contains(import_error(neox), "config.json: rotary_pct = 0.3: rotates 19 of head_dim 64"));
  }
  SUBCASE("longrope (Phi-3-mini-128k)") {
    json config = json::parse(kPhi3Mini4k);
    config["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 1.0}}, {"long_factor", {1.0, 2.0}}};
    CHECK(contains(import_error(config), "config.json: rope_scaling.type = \"longrope\": Phi-3 scales RoPE only by "
                                         "LongRoPE"));
    json llama = json::parse(kLlama32_1B);
    llama["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
    CHECK(contains(import_error(llama), "config.json: rope_scaling.rope_type = \"longrope\": the spec has no LongRoPE"));
  }
  SUBCASE("an unknown hidden_act") {
    json config = json::parse(kSmolLM2);
    config["hidden_act"] = "xielu";
    CHECK(contains(import_error(config), "config.json: hidden_act = \"xielu\": unknown activation; the spec has silu"));
  }
  SUBCASE("a missing dimension") {
    json config = json::parse(kSmolLM2);
    config.erase("hidden_size");
    CHECK(import_error(config) == "config.json: missing required key 'hidden_size'");
  }
  SUBCASE("quantized checkpoints, GPT-2's per-layer scale, wrong types") {
    json config = json::parse(kSmolLM2);
    config["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
    CHECK(contains(import_error(config), "config.json: quantization_config (quant_method \"awq\")"));
    json gpt2 = json::parse(kGpt2);
    gpt2["scale_attn_by_inverse_layer_idx"] = true;
    CHECK(contains(import_error(gpt2), "config.json: scale_attn_by_inverse_layer_idx = true"));
    json typed = json::parse(kSmolLM2);
    typed["num_hidden_layers"] = "30";
    CHECK(import_error(typed) == "config.json: num_hidden_layers = \"30\": expected an integer");
  }
  SUBCASE("contract violations and the spec's ranges are the config's errors") {
    json config = json::parse(kSmolLM2);
    config["num_key_value_heads"] = 4;
    CHECK(import_error(config) == "config.json: num_attention_heads (9) is not a multiple of num_key_value_heads (4)");
    // Qwen2's class default of 32 key/value heads, when the key is left out, is explained.
    json qwen = json::parse(kQwen25_05B);
    qwen.erase("num_key_value_heads");
    CHECK(contains(import_error(qwen), "the config has no num_key_value_heads, and transformers' config class for this "
                                       "model_type defaults it to 32; add \"num_key_value_heads\" (14 for multi-head "
                                       "attention) to config.json"));
    config = json::parse(kSmolLM2);
    config["rms_norm_eps"] = 2;
    CHECK(import_error(config) == "config.json: rms_norm_eps = 2: must be in (0, 1]");
    config = json::parse(kSmolLM2);
    config["num_hidden_layers"] = 2000;
    CHECK(import_error(config) == "config.json: num_hidden_layers = 2000: must be between 1 and 1024");
    config = json::parse(kSmolLM2);
    config["hidden_size"] = 63;
    CHECK(contains(import_error(config), "is odd, and RoPE rotates pairs of dimensions"));
    json moe = json::parse(kMixtral8x7B);
    moe["num_local_experts"] = 4096;  // 32 layers × 4096 experts × 3 tensors
    CHECK(contains(import_error(moe), "lathe handles at most 262144"));
  }
  SUBCASE("all errors at once, each naming the file") {
    json config = json::parse(kSmolLM2);
    config.erase("vocab_size");
    config["hidden_act"] = "xielu";
    config["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
    ImportOptions options;
    options.file = "models/x/config.json";
    try {
      import_hf_config(config, options);
      FAIL("expected an ImportError");
    } catch (const ImportError& e) {
      REQUIRE(e.problems().size() == 3);
      for (const std::string& p : e.problems()) CHECK(p.rfind("models/x/config.json: ", 0) == 0);
    }
  }
}

TEST_CASE("a mutated published config imports, or fails with an ImportError, never an internal error") {
  const std::vector<json> replacements = {nullptr, 0, -1, 3, 1 << 25, 1.5, 1e30, "x", true, json::array(),
                                          json::object()};
  int imported = 0, refused = 0;
  for (const Published& p : kPublishedConfigs) {
    const json original = json::parse(p.config);
    for (const auto& [key, value] : original.items()) {
      if (key == "model_type") continue;
      for (size_t r = 0; r <= replacements.size(); ++r) {
        json config = original;
        if (r == replacements.size()) config.erase(key);
        else config[key] = replacements[r];
        import_or_refuse(config, std::string(p.model_type) + ": " + key + " = " +
                                     (r < replacements.size() ? replacements[r].dump() : "(removed)"),
                         imported, refused);
      }
    }
  }
  CHECK(imported > 0);
  CHECK(refused > 0);
}

// Two keys at fault at once: a grouped Falcon with no head count and no
// KV head count (or one of 0) is refused, not divided by zero.
TEST_CASE("Falcon's grouped heads without num_attention_heads and num_kv_heads are refused naming them") {
  for (const json& kv : {json(nullptr), json(0), json("x")}) {
    json config = json::parse(kFalcon40B);
    config.erase("num_attention_heads");
    config["num_kv_heads"] = kv;
    ImportOptions options;
    options.warn = [](const std::string&) {};
    CHECK_THROWS_WITH_AS(import_hf_config(config, options), doctest::Contains("num_attention_heads"), ImportError);
  }
}

TEST_CASE("hf_config_from_spec: the model type follows from the spec, and what no config says is refused") {
  const auto type_of = [](const char* file) {
    return hf_config_from_spec(load(source_dir() / "models" / file))["model_type"].get<std::string>();
  };
  CHECK(type_of("gpt2.toml") == "gpt2");
  CHECK(type_of("gemma-2-2b.toml") == "gemma2");
  CHECK(type_of("olmo-2-1b.toml") == "olmo2");
  CHECK(type_of("mixtral-8x7b.toml") == "mixtral");
  CHECK(type_of("phi-3-mini-4k.toml") == "phi3");
  CHECK(type_of("qwen2.5-0.5b.toml") == "qwen2");
  CHECK(type_of("mistral-7b-v0.1.toml") == "mistral");
  CHECK(type_of("llama-3-8b.toml") == "llama");
  CHECK(type_of("pythia-160m.toml") == "gpt_neox");
  CHECK(type_of("phi-2.toml") == "phi");
  CHECK(type_of("bloom-560m.toml") == "bloom");
  CHECK(type_of("llava-1.5-7b.toml") == "llava");  // [vision]: a CLIP tower and an mlp projector
  // The other new families survive spec → config → spec too.
  for (const char* config : {kFalcon7B, kFalcon40B, kGptJ6B, kMpt7B, kQwen3_30B_A3B}) {
    const Spec s = import_config(json::parse(config)).spec;
    const json back = hf_config_from_spec(s);
    CHECK(back["model_type"] == json::parse(config)["model_type"]);
  }

  const auto refusal = [](const std::string& edit) {
    Spec s = parse_text(edit);
    try {
      hf_config_from_spec(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string base = "[model]\nname = \"t\"\n[dims]\nhidden = 64\nlayers = 2\nheads = 4\nintermediate = 96\n"
                           "vocab = 100\nmax_context = 128\n[weights]\npreset = \"hf-llama\"\n";
  CHECK(contains(refusal(base + "[norm]\nplacement = \"parallel\"\n"), "norm.placement: \"parallel\""));
  CHECK(contains(refusal(base + "[attention]\nscale = 0.1\n"), "attention.scale: 0.1"));
  CHECK(contains(refusal(base + "[position]\nkind = \"alibi\"\n"), "position.kind: \"alibi\""));
  CHECK(contains(refusal("[model]\nname = \"t\"\n[dims]\nhidden = 64\nlayers = 2\nheads = 4\nintermediate = 96\n"
                         "vocab = 100\nmax_context = 128\n[weights]\npreset = \"hf-llama\"\ndtype = \"q8_0\"\n"),
                 "weights.dtype: \"q8_0\""));
  // Renamed tensors: the names a config implies are the preset's.
  CHECK(contains(refusal(base + "[weights.names]\nq = \"model.layers.{layer}.attn.wq\"\n"), "weights.names.q"));
  // The cache dtype is the build's, not the model's: it does not block a config.
  CHECK(refusal(base + "[cache]\ndtype = \"f32\"\n").empty());
}

TEST_CASE("spec_differences names each differing field by its key path") {
  const Spec a = load(source_dir() / "models" / "smollm2-135m.toml");
  CHECK(spec_differences(a, a).empty());
  Spec b = a;
  b.dims.kv_heads = 9;
  b.norm.eps = 1e-6;
  b.attention.sliding_window = 4096;
  b.attention.window_pattern = {true, false};
  b.weights.names[Role::Q] = "q";
  b.name = "other";
  b.source = "elsewhere";
  const std::vector<std::string> d = spec_differences(a, b);
  REQUIRE(d.size() == 5);
  CHECK(d[0] == "dims.kv_heads: 3 vs 9");
  CHECK(d[1] == "norm.eps: 1e-05 vs 1e-06");
  CHECK(d[2] == "attention.sliding_window: 0 vs 4096");
  CHECK(contains(d[3], "attention.window_pattern"));
  CHECK(d[4] == "weights.names.q: \"model.layers.{layer}.self_attn.q_proj\" vs \"q\"");
  // The same windowed layers, spelled with a longer pattern: no difference.
  Spec c = b;
  c.attention.window_pattern = {true, false, true, false};
  CHECK(spec_differences(b, c).empty());
}

TEST_CASE("a checkpoint beside the config must hold the spec's parameters") {
  const Spec tiny = load(source_dir() / "tests" / "specs" / "tiny" / "llama-gqa.toml");
  const Manifest manifest = build_manifest(tiny);
  const auto tensor = [](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    return weights::TensorToWrite{name, DType::F16, std::move(shape),
                                  std::vector<std::byte>(static_cast<size_t>(n) * 2, std::byte{0x3c})};
  };
  std::vector<weights::TensorToWrite> tensors;
  for (const TensorSpec& t : manifest.tensors) tensors.push_back(tensor(t.name, t.shape));

  test::TempDir dir("lathe-import-test");
  test::write_file(dir.file("config.json"), hf_config_from_spec(tiny).dump(2));
  const auto import_dir = [&] {
    ImportOptions options;
    options.warn = [](const std::string&) {};
    return import_hf(dir.dir.string(), options);
  };
  const auto error_of = [&] {
    try {
      import_dir();
    } catch (const ImportError& e) {
      return std::string(e.what());
    }
    return std::string();
  };

  SUBCASE("no weights: no check") {
    const ImportResult r = import_dir();
    CHECK_FALSE(r.checkpoint);
    CHECK(spec_differences(tiny, r.spec).empty());
    CHECK(r.spec.name == sanitize_model_name(dir.dir.filename().string()));
  }
  SUBCASE("every manifest tensor: the counts agree") {
    weights::write_safetensors(dir.file("model.safetensors"), tensors);
    const ImportResult r = import_dir();
    REQUIRE(r.checkpoint);
    CHECK(r.checkpoint->spec_params == manifest.total_elements());
    CHECK(r.checkpoint->checkpoint_elements == manifest.total_elements());
  }
  SUBCASE("an extra tensor") {
    tensors.push_back(tensor("model.layers.0.self_attn.rotary_emb.inv_freq", {8}));
    weights::write_safetensors(dir.file("model.safetensors"), tensors);
    const std::string e = error_of();
    const int64_t n = manifest.total_elements();
    CHECK(contains(e, "config.json: the imported spec has " + std::to_string(n / 1000) + "," +
                          std::to_string(n % 1000 + 1000).substr(1) + " parameters, but the checkpoint"));
    CHECK(contains(e, "holds " + std::to_string((n + 8) / 1000) + "," + std::to_string((n + 8) % 1000 + 1000).substr(1)));
    CHECK(contains(e, "1 tensors in the checkpoint that the spec's manifest does not have: "
                      "model.layers.0.self_attn.rotary_emb.inv_freq"));
  }
  SUBCASE("a missing tensor") {
    const std::string dropped = tensors.back().name;
    const int64_t dropped_elements = static_cast<int64_t>(tensors.back().data.size() / 2);
    tensors.pop_back();
    weights::write_safetensors(dir.file("model.safetensors"), tensors);
    const std::string e = error_of();
    CHECK(contains(e, "parameters, but the checkpoint"));
    CHECK(contains(e, "1 tensors of the spec's manifest that the checkpoint lacks: " + dropped));
    CHECK(dropped_elements > 0);
  }
}

// GPT2LMHeadModel.save_pretrained (every fine-tuned GPT-2) names its
// tensors "transformer.h.0…" where the hub's original upload has "h.0…";
// the causal-mask buffers "h.N.attn.bias" come along in both. The same spec
// must come out, its parameters counted through the prefix.
TEST_CASE("a GPT-2 checkpoint with or without the transformer. prefix imports to the same spec") {
  Spec tiny = load(source_dir() / "tests" / "specs" / "tiny" / "gpt2.toml");
  tiny.weights.ignore = {"h.{layer}.attn.bias", "h.{layer}.attn.masked_bias"};  // as an imported gpt2 spec has it
  const Manifest manifest = build_manifest(tiny);
  std::vector<Spec> imported;
  for (const std::string prefix : {"", "transformer."}) {
    CAPTURE(prefix);
    test::TempDir dir("lathe-import-test");
    test::write_file(dir.file("config.json"), hf_config_from_spec(tiny).dump(2));
    std::vector<weights::TensorToWrite> tensors;
    for (const TensorSpec& t : manifest.tensors) tensors.push_back(f32_zeros(prefix + t.name, t.shape));
    for (int layer = 0; layer < tiny.dims.layers; ++layer)
      tensors.push_back(f32_zeros(prefix + "h." + std::to_string(layer) + ".attn.bias", {1, 1, 4, 4}));
    weights::write_safetensors(dir.file("model.safetensors"), tensors);
    const ImportResult r = import_quietly(dir.dir);
    REQUIRE(r.checkpoint);
    CHECK(r.checkpoint->checkpoint_elements == manifest.total_elements());
    CHECK(r.checkpoint->ignored_tensors == tiny.dims.layers);
    imported.push_back(r.spec);
  }
  imported[1].name = imported[0].name;  // named after their directories
  CHECK(spec_differences(imported[0], imported[1]).empty());
}

TEST_CASE("import_hf: names and files") {
  test::TempDir dir("lathe-import-names");
  fs::create_directories(dir.dir / "models--HuggingFaceTB--SmolLM2-135M" / "snapshots" /
                         "0123456789abcdef0123456789abcdef01234567");
  const fs::path snapshot =
      dir.dir / "models--HuggingFaceTB--SmolLM2-135M" / "snapshots" / "0123456789abcdef0123456789abcdef01234567";
  test::write_file((snapshot / "config.json").string(), kSmolLM2);
  ImportOptions quiet;
  quiet.warn = [](const std::string&) {};
  // A Hugging Face cache snapshot is named after its repository.
  CHECK(import_hf(snapshot.string(), quiet).spec.name == "smollm2-135m");
  CHECK(import_hf((snapshot / "config.json").string(), quiet).spec.name == "smollm2-135m");
  test::write_file(dir.file("Qwen2.5-0.5B.json"), kQwen25_05B);
  const ImportResult q = import_hf(dir.file("Qwen2.5-0.5B.json"), quiet);
  CHECK(q.spec.name == "qwen2.5-0.5b");
  CHECK(q.spec.source == dir.file("Qwen2.5-0.5B.json"));
  ImportOptions named = quiet;
  named.name = "Mine!";
  CHECK(import_hf(snapshot.string(), named).spec.name == "Mine!");

  CHECK(sanitize_model_name("HuggingFaceTB/SmolLM2 135M") == "huggingfacetb-smollm2-135m");
  CHECK(sanitize_model_name("") == "model");

  CHECK_THROWS_AS(import_hf(dir.file("absent.json"), quiet), Error);
  test::write_file(dir.file("broken.json"), "{\n  \"hidden_size\": 64,\n  not json\n}");
  CHECK_THROWS_WITH_AS(import_hf(dir.file("broken.json"), quiet), doctest::Contains("broken.json: not valid JSON"),
                       Error);
  // The line and column of the fault.
  CHECK_THROWS_WITH_AS(import_hf(dir.file("broken.json"), quiet), doctest::Contains("line 3, column 4"), Error);
}

// ---- multimodal configs: a text_config, a vision_config, [vision] ------------

// llava-hf/llava-1.5-7b-hf's config.json, as published: transformers saved
// its text_config as its differences from LlamaConfig's defaults.
const char* kLlava15_7B = R"({
  "architectures": ["LlavaForConditionalGeneration"], "ignore_index": -100, "image_token_index": 32000,
  "model_type": "llava", "pad_token_id": 32001, "projector_hidden_act": "gelu",
  "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5", "architectures": ["LlamaForCausalLM"],
                  "max_position_embeddings": 4096, "model_type": "llama", "rms_norm_eps": 1e-05,
                  "torch_dtype": "float16", "vocab_size": 32064},
  "tie_word_embeddings": false, "torch_dtype": "float16", "transformers_version": "4.36.0.dev0",
  "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
                    "model_type": "clip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 24,
                    "patch_size": 14, "projection_dim": 768, "vocab_size": 32000},
  "vision_feature_layer": -2, "vision_feature_select_strategy": "default", "vocab_size": 32064})";

// google/gemma-3-4b-it's and mistralai/Mistral-Small-3.1-24B-Instruct-2503's
// config.json, as published (their architecture keys).
const char* kGemma3_4B = R"({
  "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
  "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
  "model_type": "gemma3",
  "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
                  "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
  "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
  "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                    "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                    "patch_size": 14, "vision_use_head": false}})";

const char* kMistralSmall31 = R"({
  "architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10, "model_type": "mistral3",
  "multimodal_projector_bias": false, "projector_hidden_act": "gelu", "spatial_merge_size": 2,
  "text_config": {"attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
                  "initializer_range": 0.02, "intermediate_size": 32768, "max_position_embeddings": 131072,
                  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
                  "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0, "sliding_window": null, "use_cache": true,
                  "vocab_size": 131072},
  "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
  "vision_config": {"attention_dropout": 0.0, "head_dim": 64, "hidden_act": "silu", "hidden_size": 1024,
                    "image_size": 1540, "initializer_range": 0.02, "intermediate_size": 4096, "model_type": "pixtral",
                    "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 24, "patch_size": 14,
                    "rope_theta": 10000.0},
  "vision_feature_layer": -1})";

// Tiny configs whose towers are counted by hand below: a 16-wide decoder,
// a tower 8 wide with 2 layers of 2 heads and an MLP 16 wide, patches of
// 4 pixels.
const char* kTinyLlavaClip = R"({
  "model_type": "llava", "_name_or_path": "tiny/llava-clip", "torch_dtype": "float16", "image_token_index": 60,
  "projector_hidden_act": "gelu", "vision_feature_layer": -2, "vision_feature_select_strategy": "default",
  "text_config": {"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "intermediate_size": 32, "vocab_size": 64, "max_position_embeddings": 32},
  "vision_config": {"model_type": "clip_vision_model", "hidden_size": 8, "num_hidden_layers": 2,
                    "num_attention_heads": 2, "intermediate_size": 16, "patch_size": 4, "image_size": 8,
                    "projection_dim": 4}})";

const char* kTinyMistralText = R"({"model_type": "mistral", "hidden_size": 16, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 32, "vocab_size": 64,
  "max_position_embeddings": 64, "sliding_window": null, "rms_norm_eps": 1e-05})";

const char* kTinyPixtral = R"({"model_type": "pixtral", "hidden_size": 8, "num_hidden_layers": 2,
  "num_attention_heads": 2, "intermediate_size": 16, "patch_size": 4, "image_size": 16, "hidden_act": "silu",
  "head_dim": 4, "rope_theta": 10000.0})";

json tiny_llava_pixtral() {
  json c = {{"model_type", "llava"}, {"torch_dtype", "bfloat16"}, {"image_token_index", 10},
            {"projector_hidden_act", "gelu"}, {"vision_feature_layer", -1}, {"vision_feature_select_strategy", "full"}};
  c["text_config"] = json::parse(kTinyMistralText);
  c["vision_config"] = json::parse(kTinyPixtral);
  return c;
}

json tiny_mistral3() {
  json c = {{"model_type", "mistral3"}, {"torch_dtype", "bfloat16"}, {"image_token_index", 10},
            {"projector_hidden_act", "gelu"}, {"vision_feature_layer", -1}, {"spatial_merge_size", 2},
            {"multimodal_projector_bias", false}};
  c["text_config"] = json::parse(kTinyMistralText);
  c["vision_config"] = json::parse(kTinyPixtral);
  c["vision_config"].erase("head_dim");
  return c;
}

const char* kTinyGemma3 = R"({
  "model_type": "gemma3", "torch_dtype": "bfloat16", "boi_token_index": 250, "eoi_token_index": 251,
  "image_token_index": 262, "mm_tokens_per_image": 4,
  "text_config": {"model_type": "gemma3_text", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                  "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 32, "vocab_size": 300,
                  "max_position_embeddings": 64, "sliding_window": 8},
  "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8, "num_hidden_layers": 2,
                    "num_attention_heads": 2, "intermediate_size": 16, "patch_size": 4, "image_size": 16,
                    "vision_use_head": false}})";

// meta-llama/Llama-3.2-11B-Vision's config.json (its architecture keys).
const char* kLlama32_11BVision = R"({
  "architectures": ["MllamaForConditionalGeneration"], "image_token_index": 128256, "model_type": "mllama",
  "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
  "text_config": {"cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38], "dropout": 0, "hidden_act": "silu",
                  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
                  "max_position_embeddings": 131072, "model_type": "mllama_text_model", "num_attention_heads": 32,
                  "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
                  "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
                  "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": 128001, "pad_token_id": 128004},
  "vision_config": {"attention_heads": 16, "hidden_act": "gelu", "hidden_size": 1280, "image_size": 560,
                    "initializer_range": 0.02, "intermediate_layers_indices": [3, 7, 15, 23, 30],
                    "intermediate_size": 5120, "max_num_tiles": 4, "model_type": "mllama_vision_model",
                    "norm_eps": 1e-05, "num_channels": 3, "num_global_layers": 8, "num_hidden_layers": 32,
                    "patch_size": 14, "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2],
                                                                  [3, 1], [4, 1]],
                    "torch_dtype": "bfloat16", "vision_output_dim": 7680}})";

// A tiny one, tests/specs/vision/tiny-mllama.toml's shapes: a 64-wide decoder
// of 2 layers whose layer 1 cross-attends, a tower of 2 local layers and 1
// global one over up to 4 tiles of 16 pixels.
const char* kTinyMllama = R"({
  "model_type": "mllama", "torch_dtype": "bfloat16", "image_token_index": 211,
  "text_config": {"model_type": "mllama_text_model", "cross_attention_layers": [1], "hidden_size": 64,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 96, "vocab_size": 211, "max_position_embeddings": 160, "rope_theta": 10000.0},
  "vision_config": {"model_type": "mllama_vision_model", "hidden_size": 32, "attention_heads": 2,
                    "num_hidden_layers": 2, "num_global_layers": 1, "intermediate_size": 48, "patch_size": 4,
                    "image_size": 16, "max_num_tiles": 4, "intermediate_layers_indices": [1],
                    "vision_output_dim": 64}})";

bool has_warning(const Imported& imported, const std::string& part) {
  return std::any_of(imported.warnings.begin(), imported.warnings.end(),
                     [&](const std::string& w) { return contains(w, part); });
}

TEST_CASE("llava: llava-1.5-7b-hf's config imports to models/llava-1.5-7b.toml") {
  const Imported imported = import_config(json::parse(kLlava15_7B), "llava-1.5-7b");
  INFO(imported.text);
  CHECK(imported.warnings.empty());
  const Spec shipped = load(source_dir() / "models" / "llava-1.5-7b.toml");
  // The decoder and the tower: every field. (CLIP's post_layernorm, in the
  // checkpoint and off the features' path, is ignored as post_norm = false says.)
  for (const std::string& d : spec_differences(shipped, imported.spec)) CHECK_MESSAGE(false, d);
  const std::vector<std::string> ignored = ignored_patterns(imported.spec);
  CHECK(std::count(ignored.begin(), ignored.end(), "vision_tower.vision_model.post_layernorm.weight") == 1);
  REQUIRE(imported.spec.vision.enabled);
  // The tower (303,505,408 without post_layernorm) and the projector
  // (20,979,712); the checkpoint's 7,063,427,072 less post_layernorm's 2,048.
  CHECK(build_vision_manifest(imported.spec).total_elements() == 303'505'408 + 20'979'712);
  CHECK(make_report(imported.spec).total_params == 7'063'427'072 - 2'048);
  // Comments: the text_config's own keys and its class defaults, the tower's keys.
  CHECK(contains(imported.text, "hidden = 4096         # hidden_size (LlamaConfig default; not in text_config)\n"));
  CHECK(contains(imported.text, "vocab = 32064         # vocab_size\n"));
  CHECK(contains(imported.text, "dtype = \"f16\"         # torch_dtype (the top level's)\n"));
  CHECK(contains(imported.text, "hidden = 1024         # vision_config.hidden_size\n"));
  CHECK(contains(imported.text, "eps = 1e-5            # vision_config.layer_norm_eps (CLIPVisionConfig default; "
                                "not in vision_config)\n"));
  CHECK(contains(imported.text, "activation = \"gelu_quick\" # vision_config.hidden_act (CLIPVisionConfig default; not "
                                "in vision_config) = \"quick_gelu\"\n"));
  CHECK(contains(imported.text, "feature_layer = -2    # vision_feature_layer\n"));
  CHECK(contains(imported.text, "drop_class_token = true # vision_feature_select_strategy \"default\"\n"));
  CHECK(contains(imported.text, "marker = 32000        # image_token_index\n"));
  CHECK(contains(imported.text, "# model_type \"llava\": MHA 32:32"));
}

TEST_CASE("llava: a CLIP tower, counted by hand") {
  const Imported imported = import_config(json::parse(kTinyLlavaClip));
  INFO(imported.text);
  CHECK(imported.warnings.empty());
  const Spec& s = imported.spec;
  CHECK(s.name == "llava-clip");
  CHECK(s.dims.hidden == 16);
  CHECK(s.weights.dtype == DType::F16);
  const Vision& v = s.vision;
  REQUIRE(v.enabled);
  CHECK(v.connection == VisionConnection::Splice);
  CHECK(v.image_size == 8);
  CHECK(v.grid() == 2);
  CHECK(v.positions == VisionPositions::Learned);
  CHECK(v.class_token);
  CHECK(v.pre_norm);
  CHECK_FALSE(v.post_norm);
  CHECK(v.feature_layer == -2);
  CHECK(v.layers_run() == 1);
  CHECK(v.drop_class_token);
  CHECK(v.image_features() == 4);
  CHECK(v.norm.kind == NormKind::LayerNorm);
  CHECK(v.norm.eps == 1e-5);
  CHECK(v.mlp.activation == Activation::GeluQuick);
  CHECK_FALSE(v.mlp.gated);
  CHECK(v.projector.kind == ProjectorKind::Mlp);
  CHECK(v.projector.activation == Activation::GeluErf);
  CHECK(v.projector.bias);
  CHECK(v.projector.intermediate == 16);
  CHECK(v.tokens.marker == 60);
  CHECK(v.tokens.image == 60);
  CHECK(v.weights.preset == "hf-clip");
  // The tower: the patch convolution 8·3·4·4 = 384, the class token 8, 5
  // positions of 8, pre_layrnorm 16, and 2 layers of two LayerNorms (32),
  // q/k/v/o with biases (4 · 72) and fc1, fc2 with biases (144 + 136): 600
  // each. The projector: linear_1 16·8 + 16, linear_2 16·16 + 16.
  CHECK(build_vision_manifest(s).total_elements() == 384 + 8 + 40 + 16 + 2 * 600 + (144 + 272));
}

TEST_CASE("llava: a Pixtral tower (pixtral-12b's form), its row tokens from tokenizer.json") {
  const json config = tiny_llava_pixtral();
  SUBCASE("no tokenizer at hand: row_end and end are left out, with a warning") {
    const Imported imported = import_config(config);
    INFO(imported.text);
    const Vision& v = imported.spec.vision;
    REQUIRE(v.enabled);
    CHECK(v.positions == VisionPositions::Rope2D);
    CHECK(v.rope_theta == 10000.0);
    CHECK(v.longest_edge == 16);
    CHECK(v.image_size == 0);
    CHECK_FALSE(v.class_token);
    CHECK(v.pre_norm);
    CHECK(v.dims.head_dim == 4);
    CHECK(v.norm.kind == NormKind::RMSNorm);
    CHECK(v.norm.eps == 1e-5);
    CHECK_FALSE(v.norm.bias);
    CHECK_FALSE(v.attention.q_bias);
    CHECK_FALSE(v.attention.o_bias);
    CHECK(v.mlp.gated);
    CHECK(v.mlp.activation == Activation::SiLU);
    CHECK_FALSE(v.mlp.bias);
    CHECK(v.feature_layer == -1);
    CHECK_FALSE(v.drop_class_token);
    CHECK(v.projector.kind == ProjectorKind::Mlp);
    CHECK(v.projector.bias);
    CHECK(v.tokens.marker == 10);
    CHECK(v.tokens.image == 10);
    CHECK(v.tokens.row_end == -1);
    CHECK(v.tokens.end == -1);
    CHECK(v.weights.preset == "hf-pixtral");
    CHECK(has_warning(imported, "row_end ([IMG_BREAK]), end ([IMG_END]) left out"));
    // The tower: the patch convolution 384 (no bias), ln_pre 8, and 2 layers
    // of two RMS norms (16), q/k/v/o (4 · 64) and gate, up, down (3 · 128):
    // 656 each; no position table. The projector: 144 + 272.
    CHECK(build_vision_manifest(imported.spec).total_elements() == 384 + 8 + 2 * 656 + (144 + 272));
  }
  SUBCASE("tokenizer.json's added tokens give [IMG_BREAK] and [IMG_END]") {
    test::TempDir dir("lathe-import-vision");
    test::write_file(dir.file("tokenizer.json"), R"({"added_tokens": [{"id": 10, "content": "[IMG]"},
      {"id": 12, "content": "[IMG_BREAK]"}, {"id": 13, "content": "[IMG_END]"}], "model": {"vocab": {}}})");
    const Imported imported = import_config(config, "", dir.dir.string());
    INFO(imported.text);
    CHECK(imported.warnings.empty());
    CHECK(imported.spec.vision.tokens.row_end == 12);
    CHECK(imported.spec.vision.tokens.end == 13);
    CHECK(contains(imported.text, "row_end = 12          # tokenizer.json: [IMG_BREAK]\n"));
  }
}

TEST_CASE("mistral3: a Pixtral tower, Mistral 3's patch merger, counted by hand") {
  test::TempDir dir("lathe-import-mistral3");
  test::write_file(dir.file("config.json"), tiny_mistral3().dump(2));
  test::write_file(dir.file("tokenizer.json"), R"({"added_tokens": [{"id": 12, "content": "[IMG_BREAK]"},
    {"id": 13, "content": "[IMG_END]"}], "model": {"vocab": {}}})");
  ImportOptions options;
  std::vector<std::string> warnings;
  options.warn = [&](const std::string& line) { warnings.push_back(line); };
  const ImportResult r = import_hf(dir.dir.string(), options);
  INFO(r.text);
  CHECK(warnings.empty());
  const Vision& v = r.spec.vision;
  REQUIRE(v.enabled);
  CHECK(v.positions == VisionPositions::Rope2D);
  CHECK(v.feature_layer == -1);
  CHECK(v.projector.kind == ProjectorKind::MergeMlp);
  CHECK(v.projector.merge == 2);
  CHECK(v.projector.norm == NormKind::RMSNorm);
  CHECK(v.projector.eps == 1e-5);  // text_config.rms_norm_eps
  CHECK_FALSE(v.projector.bias);
  CHECK(v.projector.activation == Activation::GeluErf);
  CHECK(v.image_features() == 4);  // 4 × 4 patches, merged 2 × 2
  CHECK(v.tokens.marker == 10);
  CHECK(v.tokens.row_end == 12);
  CHECK(v.tokens.end == 13);
  // The tower as llava's Pixtral (1,704); the projector: its RMS norm 8, the
  // merger [8, 32] 256, linear_1 [16, 8] 128 and linear_2 [16, 16] 256, no biases.
  CHECK(build_vision_manifest(r.spec).total_elements() == 384 + 8 + 2 * 656 + (8 + 256 + 128 + 256));
  CHECK(contains(r.text, "eps = 1e-5            # text_config.rms_norm_eps: Mistral3MultiModalProjector's norm "
                         "takes the decoder's\n"));
  CHECK(contains(r.text, "bias = false          # multimodal_projector_bias\n"));
}

TEST_CASE("gemma3: a SigLIP tower, Gemma 3's pooled projector, counted by hand") {
  const json config = json::parse(kTinyGemma3);
  SUBCASE("tokenizer.json's vocabulary gives \"\\n\\n\" around the image") {
    test::TempDir dir("lathe-import-gemma3");
    test::write_file(dir.file("tokenizer.json"), R"({"model": {"type": "BPE", "vocab": {"\n": 107, "\n\n": 108}}})");
    const Imported imported = import_config(config, "", dir.dir.string());
    INFO(imported.text);
    CHECK(imported.warnings.empty());
    const Spec& s = imported.spec;
    CHECK(s.weights.dtype == DType::BF16);
    CHECK(s.norm.unit_offset);  // the decoder: Gemma 3's
    const Vision& v = s.vision;
    REQUIRE(v.enabled);
    CHECK(v.image_bidirectional);
    CHECK(v.image_size == 16);
    CHECK(v.positions == VisionPositions::Learned);
    CHECK_FALSE(v.class_token);
    CHECK(v.patch_bias);
    CHECK_FALSE(v.pre_norm);
    CHECK(v.post_norm);
    CHECK(v.feature_layer == -1);
    CHECK(v.norm.kind == NormKind::LayerNorm);
    CHECK(v.norm.eps == 1e-6);
    CHECK(v.mlp.activation == Activation::GeluTanh);
    CHECK(v.projector.kind == ProjectorKind::Pooled);
    CHECK(v.projector.tokens == 4);
    CHECK(v.projector.norm == NormKind::RMSNorm);
    CHECK(v.projector.norm_unit_offset);
    CHECK(v.projector.eps == 1e-6);
    CHECK(v.image_features() == 4);
    CHECK(v.tokens.marker == 250);
    CHECK(v.tokens.image == 262);
    CHECK(v.tokens.prefix == std::vector<int64_t>{108, 250});
    CHECK(v.tokens.suffix == std::vector<int64_t>{251, 108});
    CHECK(v.weights.preset == "hf-siglip");
    CHECK(s.weights.ignore.empty());  // vision_use_head = false: no pooling head in the checkpoint
    // The tower: the patch convolution 384 and its bias 8, 16 positions of 8,
    // 2 layers of 600 (as CLIP's), post_layernorm 16. The projector:
    // mm_soft_emb_norm 8 and mm_input_projection_weight [8, 16].
    CHECK(build_vision_manifest(s).total_elements() == 392 + 128 + 2 * 600 + 16 + (8 + 128));
  }
  SUBCASE("no tokenizer at hand: the image's own tokens alone, with a warning") {
    const Imported imported = import_config(config);
    CHECK(imported.spec.vision.tokens.prefix == std::vector<int64_t>{250});
    CHECK(imported.spec.vision.tokens.suffix == std::vector<int64_t>{251});
    CHECK(has_warning(imported, "is left out of prefix and suffix"));
  }
  SUBCASE("vision_use_head not given: SigLIP's pooling head is in the checkpoint, ignored") {
    json headed = config;
    headed["vision_config"].erase("vision_use_head");
    const Imported imported = import_config(headed);
    CHECK(imported.spec.weights.ignore.size() == 11);
    CHECK(imported.spec.weights.ignore.front() == "vision_tower.vision_model.head.probe");
  }
}

TEST_CASE("gemma3, mistral3: the published configs import to the published parameter counts") {
  SUBCASE("gemma-3-4b-it: 4,300,079,472") {
    const Imported imported = import_config(json::parse(kGemma3_4B));
    INFO(imported.text);
    CHECK(make_report(imported.spec).total_params == 4'300'079'472);
    const Vision& v = imported.spec.vision;
    CHECK(v.grid() == 64);
    CHECK(v.image_features() == 256);
    CHECK(v.tokens.marker == 255999);
    CHECK(v.tokens.image == 262144);
    CHECK(imported.spec.dims.heads == 8);  // Gemma3TextConfig's, not in text_config
    CHECK(imported.spec.dims.vocab == 262208);
    CHECK(contains(imported.text,
                   "vocab = 262208        # vocab_size (Gemma3TextConfig default; not in text_config)\n"));
  }
  SUBCASE("Mistral-Small-3.1-24B: 24,011,361,280") {
    const Imported imported = import_config(json::parse(kMistralSmall31));
    INFO(imported.text);
    CHECK(make_report(imported.spec).total_params == 24'011'361'280);
    const Vision& v = imported.spec.vision;
    CHECK(v.longest_edge == 1540);
    CHECK(v.grid() == 110);
    CHECK(v.image_features() == 55 * 55);
    CHECK(v.projector.eps == 1e-5);
  }
}

TEST_CASE("mllama: Llama-3.2-11B-Vision's config imports to its published 10,670,220,835 parameters") {
  const Imported imported = import_config(json::parse(kLlama32_11BVision));
  INFO(imported.text);
  for (const std::string& w : imported.warnings) CHECK_MESSAGE(false, w);
  CHECK(make_report(imported.spec).total_params == 10'670'220'835);
  const Spec& s = imported.spec;
  CHECK(s.dims.kv_heads == 8);
  CHECK(s.embedding_rows() == 128264);  // vocab_size + 8, the image token 128256 among them
  CHECK(s.position.theta == 500000.0);
  const Vision& v = s.vision;
  CHECK(v.connection == VisionConnection::CrossAttention);
  CHECK(v.cross_layers == std::vector<int64_t>{3, 8, 13, 18, 23, 28, 33, 38});
  CHECK(v.tiles == 4);
  CHECK(v.image_size == 560);
  CHECK(v.dims.heads == 16);
  CHECK(v.global_layers == 8);
  CHECK(v.extra_feature_layers == std::vector<int64_t>{3, 7, 15, 23, 30});
  CHECK(!v.drop_class_token);
  CHECK(v.tokens.marker == 128256);
  CHECK(v.projector.kind == ProjectorKind::Linear);
  CHECK(contains(imported.text, "rows = 128264"));
}

TEST_CASE("llava, mistral3, gemma3, mllama: a mutated config imports, or fails with an ImportError, never an internal error") {
  const std::vector<json> replacements = {nullptr, 0, -1, 3, 1 << 25, 1.5, "x", true, json::array({-2, -1}),
                                          json::object()};
  const std::vector<json> configs = {json::parse(kLlava15_7B), json::parse(kTinyLlavaClip), tiny_llava_pixtral(),
                                     tiny_mistral3(),           json::parse(kTinyGemma3),    json::parse(kGemma3_4B),
                                     json::parse(kMistralSmall31), json::parse(kTinyMllama)};
  int imported = 0, refused = 0;
  for (const json& original : configs) {
    // The top level's keys, then text_config's and vision_config's.
    for (const char* nested : {"", "text_config", "vision_config"}) {
      const json& keys = *nested ? original[nested] : original;
      for (const auto& [key, value] : keys.items()) {
        if (key == "model_type" && !*nested) continue;
        for (size_t r = 0; r <= replacements.size(); ++r) {
          json config = original;
          json& target = *nested ? config[nested] : config;
          if (r == replacements.size()) target.erase(key);
          else target[key] = replacements[r];
          import_or_refuse(config,
                           original["model_type"].get<std::string>() + ": " + nested + (*nested ? "." : "") + key +
                               " = " + (r < replacements.size() ? replacements[r].dump() : "(removed)"),
                           imported, refused);
        }
      }
    }
  }
  CHECK(imported > 0);
  CHECK(refused > 0);
}

TEST_CASE("llava, mistral3, gemma3, mllama: what a [vision] cannot say is an error naming the key") {
  SUBCASE("llava: a vision_feature_select_strategy LlavaConfig does not know") {
    json config = json::parse(kTinyLlavaClip);
    config["vision_feature_select_strategy"] = "spatial";
    CHECK(contains(import_error(config), "config.json: vision_feature_select_strategy = \"spatial\": must be "
                                         "\"default\" (the class token's row dropped) or \"full\""));
  }
  SUBCASE("llava: features of several layers") {
    json config = json::parse(kTinyLlavaClip);
    config["vision_feature_layer"] = json::array({-2, -1});
    CHECK(contains(import_error(config), "config.json: vision_feature_layer = [-2,-1]: features of several hidden "
                                         "states side by side are not imported"));
  }
  SUBCASE("llava: a Pixtral tower with the \"default\" strategy would lose a patch") {
    json config = tiny_llava_pixtral();
    config["vision_feature_select_strategy"] = "default";
    CHECK(contains(import_error(config), "drops each image's first row, which a pixtral tower has no class token for"));
  }
  SUBCASE("llava: a hidden state the tower does not have, an image token outside the vocabulary") {
    json config = json::parse(kTinyLlavaClip);
    config["vision_feature_layer"] = -4;
    config["image_token_index"] = 64;
    const std::string e = import_error(config);
    CHECK(contains(e, "config.json: vision_feature_layer = -4: must be between -3 and 2"));
    CHECK(contains(e, "config.json: image_token_index = 64 is not a token of the decoder's vocabulary (text_config's "
                      "vocab_size 64)"));
  }
  SUBCASE("llava: the text_config's errors, named as there") {
    json config = json::parse(kTinyLlavaClip);
    config["text_config"]["hidden_size"] = "wide";
    config["vision_config"]["image_size"] = 10;
    const std::string e = import_error(config);
    CHECK(contains(e, "config.json: text_config: hidden_size = \"wide\": expected an integer"));
    CHECK(contains(e, "config.json: vision_config.image_size (10) is not a multiple of vision_config.patch_size (4)"));
  }
  SUBCASE("mistral3: a tower Mistral3ForConditionalGeneration does not take") {
    json config = tiny_mistral3();
    config["vision_config"]["model_type"] = "clip_vision_model";
    CHECK(contains(import_error(config), "config.json: vision_config.model_type = \"clip_vision_model\": the "
                                         "Mistral3ForConditionalGeneration vision towers lathe imports are pixtral"));
  }
  SUBCASE("gemma3: tokens that do not pool the patch grid") {
    json config = json::parse(kTinyGemma3);
    config["mm_tokens_per_image"] = 9;
    CHECK(contains(import_error(config), "config.json: mm_tokens_per_image = 9: Gemma3MultiModalProjector pools the "
                                         "4 × 4 patches"));
  }
  SUBCASE("mllama: tiles the spec does not number, features of another width, layers that are not there") {
    json config = json::parse(kTinyMllama);
    config["vision_config"]["supported_aspect_ratios"] = json::parse("[[1, 1], [2, 2]]");
    config["vision_config"]["vision_output_dim"] = 96;
    config["text_config"]["cross_attention_layers"] = json::array({1, 2});
    config["image_token_index"] = 219;
    const std::string e = import_error(config);
    CHECK(contains(e, "config.json: vision_config.supported_aspect_ratios = [[1,1],[2,2]]: the spec numbers aspect "
                      "ratio ids by every arrangement of at most max_num_tiles tiles"));
    CHECK(contains(e, "config.json: vision_config.vision_output_dim (96) is not hidden_size × (1 + the intermediate "
                      "layers), 64"));
    CHECK(contains(e, "config.json: text_config.cross_attention_layers: layer 2 is not a decoder layer "
                      "(num_hidden_layers = 2)"));
    CHECK(contains(e, "config.json: image_token_index = 219 is not a token of the decoder's token table "
                      "(text_config's vocab_size 211 + 8 rows)"));
  }
  SUBCASE("mllama: a text_config of another class") {
    json config = json::parse(kTinyMllama);
    config["text_config"]["model_type"] = "llama";
    CHECK(contains(import_error(config), "config.json: text_config.model_type = \"llama\": MllamaConfig reads "
                                         "text_config as a MllamaTextConfig (\"mllama_text_model\")"));
  }
  SUBCASE("keys nobody reads are a warning, named as the config nests them") {
    json config = json::parse(kTinyLlavaClip);
    config["vision_config"]["num_register_tokens"] = 4;
    config["image_grid_pinpoints"] = json::array();
    const Imported imported = import_config(config);
    CHECK(has_warning(imported, "keys not read (the spec may be missing what they change): image_grid_pinpoints, "
                                "vision_config.num_register_tokens"));
  }
}

// ---- spec → config.json → spec with [vision] --------------------------------

// tests/specs/vision/`file`, each `from` of `edits` replaced by its `to` (the
// first occurrence).
using Edits = std::vector<std::pair<std::string, std::string>>;

std::string vision_spec_text(const std::string& file, const Edits& edits = {}) {
  std::string text = test::read_file((source_dir() / "tests" / "specs" / "vision" / file).string());
  for (const auto& [from, to] : edits) {
    const size_t at = text.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, from);
    text.replace(at, from.size(), to);
  }
  return text;
}

// tiny-gemma3.toml: its tower on tests/specs/tiny/gemma3.toml's decoder (a
// Gemma3TextConfig's, as Gemma3Config's text_config is).
std::string gemma3_vision_text() { return vision_spec_text("tiny-gemma3.toml"); }

// A spec's config (hf_config_from_spec), imported again (beside `tokenizer`,
// a tokenizer.json, when given) and compared with the spec.
struct RoundTrip {
  json config;
  Imported back;
  std::vector<std::string> differences;
};

RoundTrip through_config(const Spec& s, const std::string& tokenizer = "") {
  RoundTrip r;
  REQUIRE_NOTHROW(r.config = hf_config_from_spec(s));
  test::TempDir dir("lathe-export-vision");
  if (!tokenizer.empty()) test::write_file(dir.file("tokenizer.json"), tokenizer);
  r.back = import_config(r.config, s.name, tokenizer.empty() ? "" : dir.dir.string());
  r.differences = spec_differences(s, r.back.spec);
  return r;
}

// No difference and no warning on the way back.
void check_same(const RoundTrip& r) {
  INFO(r.config.dump(2));
  INFO(r.back.text);
  for (const std::string& d : r.differences) CHECK_MESSAGE(false, d);
  CHECK(r.back.warnings.empty());
}

// The error hf_config_from_spec throws for `s` ("" when it exports).
std::string export_refusal(const Spec& s) {
  try {
    hf_config_from_spec(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("spec_differences compares [vision] by its key paths, by meaning") {
  const Spec a = parse_text(vision_spec_text("tiny-llava.toml"));
  CHECK(spec_differences(a, a).empty());
  Spec b = a;
  b.vision.projector.kind = ProjectorKind::Pooled;
  b.vision.norm.eps = 1e-6;
  b.vision.tokens.marker = 201;
  b.vision.weights.encoder_names[Role::Q] = "g";
  b.vision.feature_layer = 1;  // hidden state 1 of 2: the −2 a names
  const std::vector<std::string> d = spec_differences(a, b);
  REQUIRE(d.size() == 4);
  CHECK(d[0] == "vision.norm.eps: 1e-05 vs 1e-06");
  CHECK(d[1] == "vision.projector.kind: \"mlp\" vs \"pooled\"");  // a pooled projector reads none of mlp's keys
  CHECK(d[2] == "vision.tokens.marker: 200 vs 201");
  CHECK(d[3] == "vision.weights.global_names.q: (none) vs \"g\"");
  // Without a class token, drop_class_token drops nothing.
  Spec c = a;
  c.vision.class_token = false;
  Spec e = c;
  e.vision.drop_class_token = false;
  CHECK(spec_differences(c, e).empty());
  // A spec without [vision].
  Spec text_only = a;
  text_only.vision = Vision{};
  CHECK(spec_differences(a, text_only) == std::vector<std::string>{"vision: true vs false"});
}

TEST_CASE("llava, mistral3, gemma3, mllama: a spec with [vision] survives spec → config.json → spec") {
  SUBCASE("tiny-mllama: a tiled tower, global layers, cross-attention decoder layers, mllama") {
    const RoundTrip r = through_config(parse_text(vision_spec_text("tiny-mllama.toml")));
    check_same(r);
    CHECK(r.config["model_type"] == "mllama");
    CHECK(r.config["architectures"] == json::array({"MllamaForConditionalGeneration"}));
    CHECK(r.config["text_config"]["model_type"] == "mllama_text_model");
    CHECK(r.config["text_config"]["cross_attention_layers"] == json::array({1}));
    CHECK(r.config["text_config"]["vocab_size"] == 211);  // the table's 8 more rows are the modeling code's
    CHECK(r.config["vision_config"]["model_type"] == "mllama_vision_model");
    CHECK(r.config["vision_config"]["attention_heads"] == 2);
    CHECK(r.config["vision_config"]["max_num_tiles"] == 4);
    CHECK(r.config["vision_config"]["vision_output_dim"] == 64);
    CHECK(r.config["image_token_index"] == 211);
  }
  SUBCASE("tiny-llava: a CLIP tower and an mlp projector, llava") {
    const RoundTrip r = through_config(parse_text(vision_spec_text("tiny-llava.toml")));
    check_same(r);
    CHECK(r.config["model_type"] == "llava");
    CHECK(r.config["architectures"] == json::array({"LlavaForConditionalGeneration"}));
    CHECK(r.config["torch_dtype"] == "float16");
    CHECK(r.config["text_config"]["model_type"] == "llama");
    CHECK_FALSE(r.config["text_config"].contains("torch_dtype"));  // the top level's, the whole model's
    CHECK(r.config["vision_config"]["model_type"] == "clip_vision_model");
    CHECK(r.config["vision_config"]["hidden_act"] == "quick_gelu");
    CHECK(r.config["vision_feature_layer"] == -2);
    CHECK(r.config["vision_feature_select_strategy"] == "default");
    CHECK(r.config["image_token_index"] == 200);
  }
  SUBCASE("tiny-pixtral: a Pixtral tower and Mistral 3's patch merger, mistral3") {
    // Mistral3MultiModalProjector's norm takes the decoder's epsilon
    // (text_config.rms_norm_eps): no config sets it apart, and
    // tiny-pixtral.toml's projector says the decoder's.
    const RoundTrip r = through_config(parse_text(vision_spec_text("tiny-pixtral.toml")));
    check_same(r);  // no warning: row_end and end from the config, no tokenizer.json needed
    CHECK(r.config["model_type"] == "mistral3");
    CHECK(r.config["vision_config"]["model_type"] == "pixtral");
    CHECK(r.config["vision_config"]["image_size"] == 32);  // the longest edge
    CHECK(r.config["spatial_merge_size"] == 2);
    CHECK(r.config["multimodal_projector_bias"] == false);
    CHECK(r.config["image_token_index"] == 10);
    CHECK(r.config["image_break_token_id"] == 12);
    CHECK(r.config["image_end_token_id"] == 13);
  }
  SUBCASE("tiny-pixtral with an mlp projector: pixtral-12b's form, llava") {
    const Edits mlp = {{"kind = \"merge_mlp\"\nmerge = 2\n", "kind = \"mlp\"\n"}};
    const RoundTrip r = through_config(parse_text(vision_spec_text("tiny-pixtral.toml", mlp)));
    check_same(r);
    CHECK(r.config["model_type"] == "llava");
    CHECK(r.config["vision_config"]["model_type"] == "pixtral");
    CHECK(r.config["vision_feature_layer"] == -1);
    CHECK(r.config["vision_feature_select_strategy"] == "full");  // no class token to drop
  }
  SUBCASE("tiny-gemma3's tower on a Gemma 3 decoder: gemma3, \"\\n\\n\" from tokenizer.json") {
    const Spec s = parse_text(gemma3_vision_text());
    const RoundTrip r = through_config(s, R"({"model": {"type": "BPE", "vocab": {"\n\n": 108}}})");
    check_same(r);
    CHECK(r.config["model_type"] == "gemma3");
    CHECK(r.config["text_config"]["model_type"] == "gemma3_text");
    CHECK(r.config["vision_config"]["model_type"] == "siglip_vision_model");
    CHECK(r.config["vision_config"]["vision_use_head"] == false);  // weights.ignore has no pooling head
    CHECK(r.config["boi_token_index"] == 201);
    CHECK(r.config["image_token_index"] == 202);
    CHECK(r.config["eoi_token_index"] == 203);
    CHECK(r.config["mm_tokens_per_image"] == 16);
    // The config alone: no config key holds the id of "\n\n", so without a
    // tokenizer.json prefix and suffix come back as boi and eoi alone.
    const RoundTrip bare = through_config(s);
    CHECK(bare.differences == std::vector<std::string>{"vision.tokens.prefix: [108, 201] vs [201]",
                                                       "vision.tokens.suffix: [203, 108] vs [203]"});
  }
  SUBCASE("SigLIP's pooling head in weights.ignore: vision_use_head = true") {
    // The head's tensors as the importer names them without vision_use_head = false.
    json headed = json::parse(kTinyGemma3);
    headed["vision_config"].erase("vision_use_head");
    std::string ignore = "[weights]\nignore = [";
    for (const std::string& name : import_config(headed).spec.weights.ignore) ignore += "\"" + name + "\", ";
    ignore += "]\n";
    std::string text = gemma3_vision_text();
    text.replace(text.find("[weights]\n"), 10, ignore);
    const RoundTrip r = through_config(parse_text(text), R"({"model": {"vocab": {"\n\n": 108}}})");
    check_same(r);
    CHECK(r.config["vision_config"]["vision_use_head"] == true);
  }
}

TEST_CASE("hf_config_from_spec: a [vision] no supported config reads back is refused, naming the key") {
  const auto llava = [](const std::string& from, const std::string& to) {
    return parse_text(vision_spec_text("tiny-llava.toml", {{from, to}}));
  };
  SUBCASE("cross-attention (Llama 3.2 Vision) that mllama's config does not say") {
    CHECK(contains(export_refusal(parse_text(vision_spec_text("tiny-mllama.toml", {{"rows = 219", "rows = 220"}}))),
                   "embedding.rows: 220 vs 219"));
    CHECK(contains(export_refusal(parse_text(vision_spec_text("tiny-mllama.toml", {{"kind = \"linear\"", "kind = \"mlp\""}}))),
                   "vision.projector.kind: \"mlp\": MllamaConfig's projector is \"linear\""));
  }
  SUBCASE("a projector the tower's config class does not have") {
    const Spec linear = llava("[vision.tokens]\n", "[vision.projector]\nkind = \"linear\"\n\n[vision.tokens]\n");
    CHECK(contains(export_refusal(linear),
                   "vision.projector.kind: \"linear\": the projector of a hf-clip tower's config is LlavaConfig's "
                   "\"mlp\""));
  }
  SUBCASE("Mistral 3's projector norm with an epsilon of its own") {
    const Edits own = {{"eps = 1e-5  # Mistral3MultiModalProjector", "eps = 1e-6  # Mistral3MultiModalProjector"}};
    CHECK(contains(export_refusal(parse_text(vision_spec_text("tiny-pixtral.toml", own))),
                   "vision.projector.eps = 1e-06: Mistral3MultiModalProjector's norm takes text_config's "
                   "rms_norm_eps, the decoder's norm.eps (1e-05)"));
  }
  SUBCASE("Gemma 3 on a decoder that is not Gemma3TextConfig's") {
    const std::string e =
        export_refusal(parse_text(vision_spec_text("tiny-gemma3.toml", {{"placement = \"sandwich\"\n", ""}})));
    CHECK(contains(e, "as model_type \"gemma3\" (text_config \"gemma3_text\") these fields would change"));
    CHECK(contains(e, "norm.placement: \"pre\" vs \"sandwich\""));
  }
  SUBCASE("Gemma 3's tokens in another order than Gemma3Processor's") {
    std::string text = gemma3_vision_text();
    text.replace(text.find("prefix = [108, 201]"), 19, "prefix = [201]");
    CHECK(contains(export_refusal(parse_text(text)), "vision.tokens.prefix = [201], vision.tokens.suffix = [203, 108]: "
                                                     "Gemma3Processor writes"));
  }
  SUBCASE("what the config classes hard-code, or cannot say") {
    CHECK(contains(export_refusal(llava("feature_layer = -2\n", "feature_layer = -2\nimage_bidirectional = true\n")),
                   "vision.image_bidirectional: true vs false"));
    CHECK(contains(export_refusal(llava("preset = \"hf-clip\"\n", "preset = \"hf-clip\"\ndtype = \"f32\"\n")),
                   "vision.weights.dtype: \"f32\" vs \"f16\""));
    const Spec renamed = llava("preset = \"hf-clip\"\n", "preset = \"hf-clip\"\n\n[vision.weights.names]\nq = \"q\"\n");
    CHECK(contains(export_refusal(renamed), "vision.weights.names.q: \"q\" vs "
                                            "\"vision_tower.vision_model.encoder.layers.{layer}.self_attn.q_proj\""));
    CHECK(contains(export_refusal(llava("[vision.mlp]\n", "[vision.attention]\nbias = false\n\n[vision.mlp]\n")),
                   "vision.attention.q_bias: false vs true"));
  }
}

TEST_CASE("mllama: a tiny config imports to tests/specs/vision/tiny-mllama.toml's model") {
  const Imported imported = import_config(json::parse(kTinyMllama));
  INFO(imported.text);
  const Spec want = parse_text(vision_spec_text("tiny-mllama.toml"));
  CHECK(make_report(imported.spec).total_params == make_report(want).total_params);
  for (const std::string& d : spec_differences(want, imported.spec)) CHECK_MESSAGE(false, d);
  CHECK(spec::build_vision_manifest(imported.spec).total_elements() == 50'421);
  for (const spec::TensorSpec& t : spec::build_manifest(want).tensors) {
    INFO(t.name);
    const auto m = spec::build_manifest(imported.spec);
    CHECK(std::any_of(m.tensors.begin(), m.tensors.end(),
                      [&](const spec::TensorSpec& u) { return u.name == t.name && u.shape == t.shape; }));
  }
}

}  // TEST_SUITE
