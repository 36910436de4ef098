// `lathe quantize` (generator/import/quantize.hpp): llama.cpp's per-tensor
// type rules on synthetic tensor lists (a 32-layer Llama, a tied model, rows
// that fall back, Falcon, 8 experts, layer order), a tiny Hugging Face
// checkpoint quantized end to end (types, general.file_type, bytes as
// quant.hpp writes them), the errors for inputs it cannot read, and the
// generator's refusal of the block types that have no kernels yet.
#include "generator/import/quantize.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include "core/manifest.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/import/hf_export.hpp"
#include "generator/import/import.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/safetensors.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using namespace lathe::importer;

namespace {

// A Llama-shaped GGUF tensor list: `layers` layers of hidden × hidden
// projections (kv rows `kv`), an MLP of `ff`, norms, and an LM head unless tied.
std::vector<TensorShape> llama_tensors(int64_t layers, int64_t hidden, int64_t kv, int64_t ff, bool tied) {
  std::vector<TensorShape> t = {{"token_embd.weight", {1000, hidden}, DType::F16},
                                {"output_norm.weight", {hidden}, DType::F32}};
  if (!tied) t.push_back({"output.weight", {1000, hidden}, DType::F16});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.push_back({b + "attn_norm.weight", {hidden}, DType::F32});
    t.push_back({b + "attn_q.weight", {hidden, hidden}, DType::F16});
    t.push_back({b + "attn_k.weight", {kv, hidden}, DType::F16});
    t.push_back({b + "attn_v.weight", {kv, hidden}, DType::F16});
    t.push_back({b + "attn_output.weight", {hidden, hidden}, DType::F16});
    t.push_back({b + "ffn_norm.weight", {hidden}, DType::F32});
    t.push_back({b + "ffn_gate.weight", {ff, hidden}, DType::F16});
    t.push_back({b + "ffn_up.weight", {ff, hidden}, DType::F16});
    t.push_back({b + "ffn_down.weight", {hidden, ff}, DType::F16});
  }
  return t;
}

// use_more_bits of llama-quant.cpp, written out for the test.
bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

std::string blk(int64_t l, const char* name) { return "blk." + std::to_string(l) + "." + name + ".weight"; }

}  // namespace

TEST_SUITE("quantize") {
  TEST_CASE("mixtures: keys and llama.cpp's file types") {
    CHECK(mixture_from_key("q4_k_m") == Mixture::Q4_K_M);
    CHECK(!mixture_from_key("q4_k_s").has_value());
    CHECK(mixture_info(Mixture::Q4_0).file_type == 2);
    CHECK(mixture_info(Mixture::Q8_0).file_type == 7);
    CHECK(mixture_info(Mixture::Q4_K_M).file_type == 15);
    CHECK(mixture_info(Mixture::Q5_K_M).file_type == 17);
    CHECK(mixture_info(Mixture::Q6_K).file_type == 18);
  }

  TEST_CASE("q4_k_m / q5_k_m on a 32-layer Llama: Q6_K where use_more_bits picks") {
    const QuantizeModel model{"llama", 32, 0, 32, 8};
    const std::vector<TensorShape> tensors = llama_tensors(32, 4096, 1024, 14336, false);
    for (const Mixture m : {Mixture::Q4_K_M, Mixture::Q5_K_M}) {
      const DType base = m == Mixture::Q4_K_M ? DType::Q4_K : DType::Q5_K;
      const auto chosen = choose_dtypes(m, model, tensors);
      CHECK(chosen.at("output.weight") == DType::Q6_K);
      CHECK(chosen.at("token_embd.weight") == base);
      CHECK(chosen.at("output_norm.weight") == DType::F32);
      int64_t promoted = 0;
      for (int64_t l = 0; l < 32; ++l) {
        CAPTURE(l);
        const DType more = more_bits(l, 32) ? DType::Q6_K : base;
        promoted += more_bits(l, 32);
        CHECK(chosen.at(blk(l, "attn_v")) == more);
        CHECK(chosen.at(blk(l, "ffn_down")) == more);
        CHECK(chosen.at(blk(l, "attn_q")) == base);
        CHECK(chosen.at(blk(l, "attn_k")) == base);
        CHECK(chosen.at(blk(l, "attn_output")) == base);
        CHECK(chosen.at(blk(l, "ffn_gate")) == base);
        CHECK(chosen.at(blk(l, "ffn_up")) == base);
        CHECK(chosen.at(blk(l, "attn_norm")) == DType::F32);
      }
      CHECK(promoted == 4 + 4 + 8);  // layers 0-3, 28-31 and 6, 9, …, 27
    }
  }

  TEST_CASE("the single-type mixtures") {
    const QuantizeModel model{"llama", 4, 0, 8, 8};
    const std::vector<TensorShape> tensors = llama_tensors(4, 512, 512, 1024, false);
    const auto q4 = choose_dtypes(Mixture::Q4_0, model, tensors);
    CHECK(q4.at("output.weight") == DType::Q6_K);
    CHECK(q4.at("token_embd.weight") == DType::Q4_0);
    CHECK(q4.at(blk(0, "attn_v")) == DType::Q4_0);
    CHECK(q4.at(blk(0, "ffn_down")) == DType::Q4_0);
    const auto q8 = choose_dtypes(Mixture::Q8_0, model, tensors);
    CHECK(q8.at("output.weight") == DType::Q8_0);
    CHECK(q8.at(blk(3, "ffn_down")) == DType::Q8_0);
    const auto q6 = choose_dtypes(Mixture::Q6_K, model, tensors);
    CHECK(q6.at("output.weight") == DType::Q6_K);
    CHECK(q6.at(blk(2, "attn_q")) == DType::Q6_K);
    CHECK(q6.at("blk.2.ffn_norm.weight") == DType::F32);
  }

  TEST_CASE("tied embeddings: token_embd is treated as the output") {
    const auto chosen = choose_dtypes(Mixture::Q4_K_M, {"llama", 8, 0, 8, 8}, llama_tensors(8, 256, 256, 512, true));
    CHECK(chosen.at("token_embd.weight") == DType::Q6_K);
  }

  TEST_CASE("rows that are not whole blocks fall back as llama.cpp's do") {
    // hidden 96: Q4_K → Q5_0, Q6_K → Q8_0; the output of a row the base
    // block does not divide is Q8_0; hidden 80: not even 32 → F16.
    const QuantizeModel model{"llama", 8, 0, 4, 4};
    auto chosen = choose_dtypes(Mixture::Q4_K_M, model, llama_tensors(8, 96, 96, 256, false));
    CHECK(chosen.at("output.weight") == DType::Q8_0);
    CHECK(chosen.at(blk(1, "attn_q")) == DType::Q5_0);
    CHECK(chosen.at(blk(0, "attn_v")) == DType::Q8_0);   // Q6_K, fallen back
    CHECK(chosen.at(blk(0, "ffn_down")) == DType::Q6_K);  // rows of ff = 256
    CHECK(chosen.at(blk(1, "ffn_down")) == DType::Q4_K);
    chosen = choose_dtypes(Mixture::Q5_K_M, model, llama_tensors(8, 96, 96, 256, false));
    CHECK(chosen.at(blk(1, "attn_q")) == DType::Q5_1);
    // ffn_down rows of 80: not even whole blocks of 32, so F16 (Q6_K → Q8_0 → F16 too).
    chosen = choose_dtypes(Mixture::Q4_K_M, model, llama_tensors(8, 256, 256, 80, false));
    CHECK(chosen.at(blk(0, "ffn_down")) == DType::F16);
    CHECK(chosen.at(blk(1, "ffn_down")) == DType::F16);
    CHECK(chosen.at(blk(1, "ffn_up")) == DType::Q4_K);
    // A Q4_0 or Q8_0 row that is not whole blocks has no fallback.
    try {
      choose_dtypes(Mixture::Q4_0, model, llama_tensors(8, 256, 256, 80, false));
      FAIL_CHECK("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()) == "blk.0.ffn_down.weight: rows of 80 values are not whole Q4_0 blocks of 32 "
                                     "(llama.cpp has no fallback for this type either)");
    }
  }

  TEST_CASE("layers count in llama.cpp's order (by layer number, not by name)") {
    // 12 layers: use_more_bits picks 0, 3, 6, 9, 10, 11. By name, blk.10
    // would come third.
    const auto chosen = choose_dtypes(Mixture::Q4_K_M, {"llama", 12, 0, 8, 8}, llama_tensors(12, 256, 256, 256, false));
    for (int64_t l = 0; l < 12; ++l) {
      CAPTURE(l);
      CHECK(chosen.at(blk(l, "attn_v")) == (more_bits(l, 12) ? DType::Q6_K : DType::Q4_K));
    }
    CHECK(chosen.at(blk(10, "attn_v")) == DType::Q6_K);
    CHECK(chosen.at(blk(2, "attn_v")) == DType::Q4_K);
  }

  TEST_CASE("architecture rules: Falcon, 8 experts, fused qkv, routers") {
    std::vector<TensorShape> t = llama_tensors(16, 256, 256, 512, false);
    auto chosen = choose_dtypes(Mixture::Q4_K_M, {"falcon", 16, 0, 8, 8}, t);
    CHECK(chosen.at("output.weight") == DType::Q8_0);
    CHECK(chosen.at(blk(0, "ffn_down")) == DType::Q6_K);  // i < n/16
    CHECK(chosen.at(blk(3, "ffn_down")) == DType::Q4_K);
    CHECK(chosen.at(blk(4, "ffn_down")) == DType::Q5_K);  // use_more_bits: (4 - 2) % 3 == 2
    t.push_back({"blk.0.ffn_gate_inp.weight", {8, 256}, DType::F32});
    chosen = choose_dtypes(Mixture::Q4_K_M, {"llama", 16, 8, 8, 8}, t);
    CHECK(chosen.at(blk(5, "attn_v")) == DType::Q8_0);
    CHECK(chosen.at(blk(5, "attn_k")) == DType::Q8_0);
    CHECK(chosen.at(blk(5, "attn_output")) == DType::Q5_K);
    CHECK(chosen.at("blk.0.ffn_gate_inp.weight") == DType::F32);  // routers are not quantized
    const std::vector<TensorShape> fused = {{"blk.0.attn_qkv.weight", {768, 256}, DType::F16},
                                            {"blk.1.attn_qkv.weight", {768, 256}, DType::F16}};
    chosen = choose_dtypes(Mixture::Q4_K_M, {"phi3", 2, 0, 4, 4}, fused);
    // Counted as attn_v, n = 2: i < n/8 = 0 holds for none, i >= 7n/8 = 1 for the second.
    CHECK(chosen.at("blk.0.attn_qkv.weight") == DType::Q4_K);
    CHECK(chosen.at("blk.1.attn_qkv.weight") == DType::Q6_K);
  }

  TEST_CASE("a tiny Hugging Face checkpoint quantized end to end") {
    const char* text = R"([model]
name = "tiny-quant"
[dims]
hidden = 256
layers = 8
heads = 4
kv_heads = 2
intermediate = 256
vocab = 64
max_context = 64
[norm]
kind = "rmsnorm"
eps = 1e-5
[position]
theta = 10000.0
[embedding]
tied = false
[weights]
dtype = "f32"
preset = "hf-llama"
)";
    spec::Diagnostics diag("tiny.toml");
    const std::optional<spec::Spec> s = spec::parse_spec_string(text, "tiny.toml", diag);
    REQUIRE_MESSAGE(s, diag.format());
    test::TempDir tmp("lathe-quantize-test");
    std::filesystem::create_directories(tmp.file("hf"));
    {
      std::ofstream config(tmp.file("hf/config.json"));
      config << hf_config_from_spec(*s).dump(2);
    }
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<weights::TensorToWrite> tensors;
    std::map<std::string, std::vector<float>> values;
    for (const spec::TensorSpec& t : spec::build_manifest(*s).tensors) {
      std::vector<float>& v = values[t.name];
      v.resize(static_cast<size_t>(t.elements()));
      for (float& x : v) x = normal(rng);
      tensors.push_back({t.name, DType::F32, t.shape, weights::encode_values(DType::F32, v)});
    }
    weights::write_safetensors(tmp.file("hf/model.safetensors"), tensors);

    const std::string out = tmp.file("out.gguf");
    const QuantizeResult result = quantize_model(tmp.file("hf"), out, Mixture::Q4_K_M);
    const weights::GgufFile file(out);
    CHECK(file.integer("general.file_type") == 15);
    CHECK(file.integer("general.quantization_version") == 2);
    CHECK(file.string("general.architecture") == "llama");
    auto dtype_of = [&](const std::string& name) {
      const weights::TensorInfo* t = file.find(name);
      REQUIRE_MESSAGE(t != nullptr, name);
      return t->dtype;
    };
    CHECK(dtype_of("output.weight") == DType::Q6_K);
    CHECK(dtype_of("token_embd.weight") == DType::Q4_K);
    CHECK(dtype_of("output_norm.weight") == DType::F32);
    for (int64_t l = 0; l < 8; ++l) {
      CAPTURE(l);
      const DType more = more_bits(l, 8) ? DType::Q6_K : DType::Q4_K;  // layers 0, 3, 6, 7
      CHECK(dtype_of(blk(l, "attn_v")) == more);
      CHECK(dtype_of(blk(l, "ffn_down")) == more);
      CHECK(dtype_of(blk(l, "attn_q")) == DType::Q4_K);
      CHECK(dtype_of(blk(l, "attn_norm")) == DType::F32);
    }
    CHECK(result.tensors.at(DType::Q6_K) == 1 + 2 * 4);
    // Bytes: the checkpoint's values through quant.hpp (ffn_up: no reordering
    // on the way to GGUF).
    const weights::TensorInfo* up = file.find("blk.5.ffn_up.weight");
    const std::vector<std::byte> expected = weights::quantize(DType::Q4_K, values.at("model.layers.5.mlp.up_proj.weight"));
    const std::span<const std::byte> got = file.data(*up);
    CHECK(std::vector<std::byte>(got.begin(), got.end()) == expected);

    // The GGUF file quantized again is refused: its matrices are blocks already.
    try {
      quantize_model(out, tmp.file("again.gguf"), Mixture::Q8_0);
      FAIL_CHECK("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Unsupported);
      CHECK(std::string(e.what()).find("already; lathe quantize reads f32, f16 and bf16") != std::string::npos);
    }
    // The quantized file imports as what it holds: q4_k, with q6_k exceptions by role.
    const ImportResult mixed = import_model_config(out);
    CHECK(mixed.spec.weights.dtype == DType::Q4_K);
    CHECK(mixed.spec.weights.matrix_dtype(Role::LmHead, -1) == DType::Q6_K);
    CHECK(mixed.text.find("[weights.dtypes]") != std::string::npos);
    for (const spec::TensorSpec& t : spec::build_manifest(mixed.spec).tensors)
      if (const weights::TensorInfo* info = file.find(t.name); info && t.shape.size() == 2) {
        CAPTURE(t.name);
        CHECK(t.dtype == info->dtype);
      }
    // A q6_k file is one dtype: imported as such.
    quantize_model(tmp.file("hf"), tmp.file("q6.gguf"), Mixture::Q6_K);
    const ImportResult q6 = import_model_config(tmp.file("q6.gguf"));
    CHECK(q6.spec.weights.dtype == DType::Q6_K);
    CHECK(q6.text.find("dtype = \"q6_k\"") != std::string::npos);
  }

  TEST_CASE("a GGUF file of f16 matrices: its metadata kept, the file type set, vectors f32") {
    test::TempDir tmp("lathe-quantize-test");
    std::vector<float> matrix(256 * 64), vector(256, 1.0f);
    for (size_t i = 0; i < matrix.size(); ++i) matrix[i] = std::sin(static_cast<float>(i) * 0.01f);
    const std::map<std::string, weights::GgufValue> metadata = {{"general.architecture", std::string("llama")},
                                                                {"general.file_type", uint32_t{1}},
                                                                {"llama.block_count", uint32_t{1}},
                                                                {"tokenizer.ggml.model", std::string("gpt2")}};
    weights::write_gguf(tmp.file("f16.gguf"), metadata,
                        {{"blk.0.attn_q.weight", DType::F16, {64, 256}, weights::encode_values(DType::F16, matrix)},
                         {"blk.0.attn_norm.weight", DType::F16, {256}, weights::encode_values(DType::F16, vector)}});
    quantize_model(tmp.file("f16.gguf"), tmp.file("q4.gguf"), Mixture::Q4_0);
    const weights::GgufFile file(tmp.file("q4.gguf"));
    CHECK(file.integer("general.file_type") == 2);
    CHECK(file.string("tokenizer.ggml.model") == "gpt2");
    CHECK(file.find("blk.0.attn_norm.weight")->dtype == DType::F32);
    const weights::TensorInfo* q = file.find("blk.0.attn_q.weight");
    CHECK(q->dtype == DType::Q4_0);
    CHECK(q->shape == std::vector<int64_t>{64, 256});
    // The f16 values, widened, quantized as quant.hpp does.
    std::vector<float> widened(matrix.size());
    const std::vector<std::byte> f16 = weights::encode_values(DType::F16, matrix);
    weights::convert(DType::F16, f16, DType::F32, std::as_writable_bytes(std::span(widened)));
    const std::span<const std::byte> got = file.data(*q);
    CHECK(std::vector<std::byte>(got.begin(), got.end()) == weights::quantize(DType::Q4_0, widened));

    // The _M mixtures need the layer count.
    weights::write_gguf(tmp.file("bare.gguf"), {},
                        {{"blk.0.attn_q.weight", DType::F16, {64, 256}, weights::encode_values(DType::F16, matrix)}});
    CHECK_THROWS_WITH(quantize_model(tmp.file("bare.gguf"), tmp.file("q4km.gguf"), Mixture::Q4_K_M),
                      doctest::Contains("no general.architecture / <arch>.block_count"));
  }

  TEST_CASE("inputs it cannot read: clear errors") {
    test::TempDir tmp("lathe-quantize-test");
    test::write_file(tmp.file("garbage.gguf"), "this is no model at all");
    try {
      quantize_model(tmp.file("garbage.gguf"), tmp.file("out.gguf"), Mixture::Q4_0);
      FAIL_CHECK("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::BadFile);
      CHECK(std::string(e.what()) == tmp.file("garbage.gguf") + ": not a GGUF file (no \"GGUF\" magic)");
    }
    // A valid file cut short.
    weights::write_gguf(tmp.file("whole.gguf"), {{"general.architecture", std::string("llama")}},
                        {{"w", DType::F32, {4, 32}, std::vector<std::byte>(512)}});
    const std::string whole = test::read_file(tmp.file("whole.gguf"));
    test::write_file(tmp.file("cut.gguf"), whole.substr(0, whole.size() - 100));
    try {
      quantize_model(tmp.file("cut.gguf"), tmp.file("out.gguf"), Mixture::Q4_0);
      FAIL_CHECK("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::BadFile);
      CHECK(std::string(e.what()).find("w: bytes [0, 0 + 512) of the data section") != std::string::npos);
    }
    CHECK(!std::filesystem::exists(tmp.file("out.gguf")));
  }

  TEST_CASE("specs: block dtypes, exceptions by role, rows of whole blocks, and what lathe report counts") {
    const std::string head = "[model]\nname = \"x\"\n[dims]\nhidden = 256\nlayers = 2\nheads = 4\nintermediate = 320\n"
                             "vocab = 64\nmax_context = 64\n[weights]\npreset = \"gguf\"\ndtype = \"q4_k\"\n";
    spec::Diagnostics diag("x.toml");
    // ffn_down's rows are 320 values: not whole Q4_K super-blocks.
    std::optional<spec::Spec> s = spec::parse_spec_string(head, "x.toml", diag);
    REQUIRE_MESSAGE(s, diag.format());
    CHECK(!emit::check_supported(*s, diag));
    CHECK(diag.format().find("x.toml:12:9: not supported yet: weights.dtype (\"q4_k\": blk.0.ffn_down.weight has rows "
                             "of 320 values, not a multiple of the 256 of a Q4_K block)") != std::string::npos);
    // llama.cpp's fallback for such rows, as an exception by role, one dtype per layer.
    const std::string mixed = head + "[weights.dtypes]\ndown = [\"q5_0\", \"q8_0\"]\nlm_head = \"q6_k\"\n";
    spec::Diagnostics diag2("x.toml");
    s = spec::parse_spec_string(mixed, "x.toml", diag2);
    REQUIRE_MESSAGE(s, diag2.format());
    CHECK_MESSAGE(emit::check_supported(*s, diag2), diag2.format());
    std::map<std::string, DType> dtypes;
    for (const spec::TensorSpec& t : spec::build_manifest(*s).tensors) dtypes[t.name] = t.dtype;
    CHECK(dtypes.at("blk.0.ffn_down.weight") == DType::Q5_0);
    CHECK(dtypes.at("blk.1.ffn_down.weight") == DType::Q8_0);
    CHECK(dtypes.at("blk.1.ffn_up.weight") == DType::Q4_K);
    CHECK(dtypes.at("output.weight") == DType::Q6_K);
    CHECK(dtypes.at("blk.0.attn_norm.weight") == DType::F32);
    // lathe report counts block bytes: 144 per 256 values of Q4_K, 210 of Q6_K.
    const spec::Report r = spec::make_report(*s);
    const auto bytes_as = [&](DType d) {
      for (const auto& [dt, b] : r.weight_bytes)
        if (dt == d) return b;
      return int64_t{-1};
    };
    CHECK(bytes_as(DType::Q4_K) == (r.total_params * 144 + 255) / 256);
    CHECK(bytes_as(DType::Q6_K) == (r.total_params * 210 + 255) / 256);
    CHECK(bytes_as(DType::Q4_0) == (r.total_params * 18 + 31) / 32);
    // The spec's own dtypes: between all-Q4_K and all-Q8_0; on the device a little more (row planes, f32 vectors).
    CHECK(r.checkpoint_bytes > bytes_as(DType::Q4_K));
    CHECK(r.checkpoint_bytes < bytes_as(DType::Q8_0));
    CHECK(r.device_weight_bytes >= r.checkpoint_bytes);
    CHECK(r.device_weight_bytes < r.checkpoint_bytes * 103 / 100);
    REQUIRE(!r.device_bytes_at_context.empty());
    CHECK(r.device_bytes_at_context.back().first == 64);
    CHECK(r.device_bytes_at_context.back().second == r.device_weight_bytes + r.kv_bytes_max_context);
  }
}
