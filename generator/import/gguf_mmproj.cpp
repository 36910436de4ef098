#include "generator/import/gguf_mmproj.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/manifest.hpp"
#include "generator/import/gguf_families.hpp"
#include "generator/import/gguf_import.hpp"
#include "generator/import/gguf_reader.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/text/tokenize/byte_level.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::importer {

namespace {

using spec::Spec;
using spec::Vision;
using weights::GgufValue;
using namespace gguf_families;

// The projector types read, each a family of tower and projector.
enum class Family { Llava, Gemma3, Pixtral };
struct FamilyInfo {
  Family family;
  const char* type;  // clip.projector_type
  const char* what;
};
constexpr FamilyInfo kFamilies[] = {
    {Family::Llava, "mlp", "LLaVA-1.5's CLIP tower and mlp projector"},
    {Family::Gemma3, "gemma3", "Gemma 3's SigLIP tower and pooled projector"},
    {Family::Pixtral, "pixtral", "Pixtral's (and Mistral 3's) tower and projector"},
};
const FamilyInfo& info(Family f) { return kFamilies[static_cast<int>(f)]; }

// The family an HF spec's [vision] belongs to, or an Error naming the field.
Family family_of(const Vision& v) {
  auto refuse = [](const std::string& what) { throw Error(ErrorKind::Unsupported, what); };
  if (!v.enabled || v.connection != spec::VisionConnection::Splice)
    refuse("vision.connection: llama.cpp's mmproj files hold a tower whose features a splice reads (mtmd)");
  if (v.positions == spec::VisionPositions::Rope2D) {
    if (v.projector.kind != spec::ProjectorKind::Mlp && v.projector.kind != spec::ProjectorKind::MergeMlp)
      refuse("vision.projector.kind: llama.cpp's pixtral projector is an mlp, or Mistral 3's merge_mlp");
    return Family::Pixtral;
  }
  if (v.projector.kind == spec::ProjectorKind::Pooled) return Family::Gemma3;
  if (v.projector.kind == spec::ProjectorKind::Mlp && v.class_token) return Family::Llava;
  refuse("vision.projector.kind: llama.cpp's mmproj files hold LLaVA's mlp (a CLIP tower with a class token), Gemma "
         "3's pooled or Pixtral's projector");
  return Family::Llava;
}

// The converter's dtype of each role whose dtype is not the file's
// (`dtype`, its matrices'): the patch embedding's convolution and
// Mistral 3's merger are f16 in an f16 file and f32 otherwise (the legacy
// LLaVA converter's convolution is f16 whatever the file), Gemma 3 keeps
// its embeddings in f32 and its input projection in f16.
std::map<Role, std::vector<DType>> converter_dtypes(Family f, DType dtype) {
  std::map<Role, std::vector<DType>> out;
  const auto add = [&](Role role, DType d) {
    if (d != dtype) out[role] = {d};
  };
  switch (f) {
    case Family::Llava: add(Role::PatchEmbed, DType::F16); break;
    case Family::Gemma3:
      add(Role::PatchEmbed, DType::F32);
      add(Role::PosEmbed, DType::F32);
      add(Role::ProjIn, DType::F16);
      break;
    case Family::Pixtral:
      add(Role::PatchEmbed, dtype == DType::F16 ? DType::F16 : DType::F32);
      add(Role::PatchMerge, dtype == DType::F16 ? DType::F16 : DType::F32);
      break;
  }
  return out;
}

// The legacy LLaVA converter's names of CLIP's fc1 and fc2.
constexpr const char* kLegacyUp = "v.blk.{layer}.ffn_down";
constexpr const char* kLegacyDown = "v.blk.{layer}.ffn_up";
// Pixtral's copy of the text model's [IMG_BREAK] row.
constexpr const char* kImgBreak = "v.token_embd.img_break";

GgufValue f32_array(const std::array<double, 3>& v) {
  weights::GgufArray a{weights::GgufType::F32, {}};
  for (double x : v) a.items.emplace_back(static_cast<float>(x));
  return a;
}

}  // namespace

std::vector<std::string> supported_mmproj_projectors() {
  std::vector<std::string> out;
  for (const FamilyInfo& f : kFamilies) out.emplace_back(f.type);
  return out;
}

spec::Spec mmproj_twin(const spec::Spec& hf, DType dtype) {
  const Family f = family_of(hf.vision);
  Spec s = gguf_twin(hf);
  s.vision = hf.vision;
  Vision& v = s.vision;
  if (f == Family::Llava) {  // the converter keeps the layers up to the feature layer
    v.dims.layers = v.layers_run();
    v.feature_layer = v.dims.layers;
  }
  if (f == Family::Gemma3) v.projector.norm_unit_offset = false;  // mm.soft_emb_norm holds 1 + w
  if (f == Family::Pixtral) v.rope_pairing = spec::RopePairing::Interleaved;
  v.weights.preset = "gguf";
  v.weights.names = spec::vision_preset_names("gguf", v);
  if (f == Family::Llava) {
    v.weights.names[Role::Up] = kLegacyUp;
    v.weights.names[Role::Down] = kLegacyDown;
  }
  v.weights.encoder_names.clear();
  v.weights.dtype = dtype;
  v.weights.vector_dtype = DType::F32;
  v.weights.layout = Layout::OutIn;
  v.weights.role_dtypes = converter_dtypes(f, dtype);
  v.weights.ignore.clear();
  if (f == Family::Pixtral && v.tokens.row_end >= 0) v.weights.ignore.push_back(kImgBreak);
  return s;
}

std::map<std::string, GgufValue> mmproj_metadata_from_spec(const spec::Spec& hf, DType dtype,
                                                           const std::array<double, 3>& mean,
                                                           const std::array<double, 3>& std) {
  const Vision& v = hf.vision;
  const Family f = family_of(v);
  const auto u32 = [](int64_t x) { return GgufValue(static_cast<uint32_t>(x)); };
  using spec::Activation;
  std::map<std::string, GgufValue> m;
  m["general.architecture"] = std::string("clip");
  m["general.name"] = hf.name;
  m["general.file_type"] = file_type(dtype);
  m["clip.has_vision_encoder"] = true;
  m["clip.projector_type"] = std::string(info(f).type);
  const std::string V = "clip.vision.";
  m[V + "image_size"] = u32(f == Family::Pixtral ? v.longest_edge : v.image_size);
  m[V + "patch_size"] = u32(v.patch);
  m[V + "embedding_length"] = u32(v.dims.hidden);
  m[V + "feed_forward_length"] = u32(v.dims.intermediate);
  m[V + "attention.head_count"] = u32(v.dims.heads);
  m[V + "attention.layer_norm_epsilon"] = GgufValue(static_cast<float>(v.norm.eps));
  m[V + "image_mean"] = f32_array(mean);
  m[V + "image_std"] = f32_array(std);
  // (The legacy LLaVA converter writes CLIP's own projection_dim, which a
  // spec does not hold; the others the text model's width.)
  m[V + "projection_dim"] = u32(hf.dims.hidden);
  switch (f) {
    case Family::Llava: {
      if (v.mlp.activation != Activation::GeluQuick && v.mlp.activation != Activation::GeluErf)
        throw Error(ErrorKind::Unsupported, "vision.mlp.activation: llama.cpp's CLIP computes quick GELU or GELU");
      m["general.description"] = std::string("image encoder for LLaVA");
      m["clip.has_text_encoder"] = false;
      m["clip.has_llava_projector"] = true;
      m[V + "block_count"] = u32(v.layers_run());
      // The feature layer as a hidden-state index from 0; the layers after
      // it are not written.
      m[V + "feature_layer"] = weights::GgufArray{weights::GgufType::I32, {GgufValue(static_cast<int32_t>(v.layers_run()))}};
      m["clip.use_gelu"] = v.mlp.activation == Activation::GeluErf;
      break;
    }
    case Family::Gemma3: {
      if (v.mlp.activation != Activation::GeluTanh)
        throw Error(ErrorKind::Unsupported, "vision.mlp.activation: llama.cpp's gemma3 tower computes gelu_tanh");
      m["general.type"] = std::string("mmproj");
      m[V + "block_count"] = u32(v.dims.layers);
      m["clip.use_gelu"] = true;
      const int64_t scale = v.grid() / v.projector.pooled_side();
      if (scale != 4) m[V + "projector.scale_factor"] = u32(scale);  // written only off the default
      break;
    }
    case Family::Pixtral: {
      if (v.mlp.activation != Activation::SiLU && v.mlp.activation != Activation::GeluErf)
        throw Error(ErrorKind::Unsupported, "vision.mlp.activation: llama.cpp's pixtral tower computes silu or gelu");
      m["general.type"] = std::string("mmproj");
      m[V + "block_count"] = u32(v.dims.layers);
      m[v.mlp.activation == Activation::SiLU ? "clip.use_silu" : "clip.use_gelu"] = true;
      if (v.projector.kind == spec::ProjectorKind::MergeMlp) m[V + "spatial_merge_size"] = u32(v.projector.merge);
      break;
    }
  }
  return m;
}

void for_each_mmproj_tensor(const spec::Spec& hf, DType dtype, const std::string& in,
                            const std::function<void(GgufTensorValues&)>& emit) {
  const Family f = family_of(hf.vision);
  const Spec tw = mmproj_twin(hf, dtype);
  using Key = std::tuple<Role, bool, int64_t>;
  std::map<Key, spec::TensorSpec> hf_tensors;
  for (const spec::TensorSpec& t : spec::build_vision_manifest(hf).tensors) hf_tensors[{t.role, t.bias, t.layer}] = t;
  const weights::Checkpoint checkpoint(in);
  const auto read = [&](const std::string& name, int64_t elements) {
    const weights::Checkpoint::Tensor* source = checkpoint.find(name);
    if (source == nullptr) throw Error(ErrorKind::NotFound, in + ": no tensor " + name);
    std::vector<float> values(static_cast<size_t>(source->info->bytes / weights::dtype_size(source->info->dtype)));
    weights::convert(source->info->dtype, source->file->data(*source->info), DType::F32,
                     std::as_writable_bytes(std::span(values)));
    if (elements >= 0 && static_cast<int64_t>(values.size()) != elements)
      throw Error(ErrorKind::BadFile, in + ": " + name + ": " + std::to_string(values.size()) + " values, " +
                                          std::to_string(elements) + " expected");
    return values;
  };
  for (const spec::TensorSpec& t : spec::build_vision_manifest(tw).tensors) {
    const auto it = hf_tensors.find({t.role, t.bias, t.layer});
    if (it == hf_tensors.end()) throw Error(ErrorKind::InvalidArgument, t.name + ": the HF spec has no such tensor");
    GgufTensorValues out{t.name, t.shape, t.dtype, read(it->second.name, t.elements())};
    // Pixtral's q and k: rows permuted head by head for adjacent pairs.
    if (f == Family::Pixtral && (t.role == Role::Q || t.role == Role::K))
      out.values = interleave_rows(out.values, t.shape[0], t.shape.size() == 2 ? t.shape[1] : 1, tw.vision.dims.head_dim);
    if (t.role == Role::ProjNorm && !t.bias && hf.vision.projector.norm_unit_offset &&
        !tw.vision.projector.norm_unit_offset)
      for (float& x : out.values) x += 1.0f;
    emit(out);
  }
  if (f == Family::Pixtral && hf.vision.tokens.row_end >= 0) {
    const int64_t hidden = hf.dims.hidden;
    for (const spec::TensorSpec& t : spec::build_manifest(hf).tensors) {
      if (t.role != Role::Embed) continue;
      const std::vector<float> table = read(t.name, t.elements());
      const auto row = table.begin() + hf.vision.tokens.row_end * hidden;
      GgufTensorValues img_break{kImgBreak, {hidden}, DType::F32, std::vector<float>(row, row + hidden)};
      emit(img_break);
    }
  }
}

// ---- the pair's [vision] ------------------------------------------------------

namespace {

// The mmproj's tower and projector into doc's [vision] tables.
class MmprojReader {
 public:
  MmprojReader(TomlDoc& doc, Reader& r, const spec::Spec& text, const std::vector<std::string>& vocabulary,
               const std::string& text_file)
      : doc_(doc), r_(r), text_(text), vocabulary_(vocabulary), text_file_(text_file) {}

  void run() {
    if (const auto arch = r_.string("general.architecture"); arch && *arch != "clip")
      r_.problem("general.architecture \"" + *arch + "\": an mmproj file's is \"clip\"");
    if (flag("clip.has_audio_encoder"))
      r_.problem("clip.has_audio_encoder: an audio encoder is not read (lathe's [vision] takes images)");
    if (const GgufValue* v = r_.value("clip.has_vision_encoder"); v && !flag("clip.has_vision_encoder"))
      r_.problem("clip.has_vision_encoder: false; an mmproj without a vision encoder has nothing to read");
    const std::string key = r_.value("clip.projector_type") ? "clip.projector_type" : "clip.vision.projector_type";
    const std::string type = r_.string(key).value_or("");
    const auto found = std::find_if(std::begin(kFamilies), std::end(kFamilies),
                                    [&](const FamilyInfo& f) { return type == f.type; });
    if (found == std::end(kFamilies)) {
      std::string list;
      for (const FamilyInfo& f : kFamilies) list += (list.empty() ? "" : ", ") + std::string(f.type) + " (" + f.what + ")";
      r_.problem(type.empty() ? "clip.projector_type: missing"
                              : key + " \"" + type + "\" is not read (read: " + list + ")");
      throw ImportError(r_.problems());
    }
    family_ = found->family;
    geometry();
    tower();
    projector();
    tokens();
    weights();
  }

 private:
  bool flag(const std::string& key) const {
    const GgufValue* v = r_.value(key);
    const bool* b = v ? std::get_if<bool>(&v->value) : nullptr;
    return b != nullptr && *b;
  }
  std::string t0(const std::string& name) const { return "v.blk.0." + name; }
  const weights::TensorInfo* tensor(const std::string& name) const { return r_.tensor(name); }

  void geometry() {
    const std::string V = "clip.vision.";
    TomlTable& vt = doc_.table("vision");
    for (const char* table : {"vision.norm", "vision.attention", "vision.mlp", "vision.projector", "vision.tokens",
                              "vision.weights"})
      doc_.table(table);
    vt.set("connection", "splice", std::string("mtmd: the projected features replace the image tokens' rows"));
    patch_ = r_.required(V + "patch_size");
    const int64_t size = r_.required(V + "image_size");
    vt.set("patch", patch_, V + "patch_size");
    if (family_ == Family::Pixtral) vt.set("longest_edge", size, V + "image_size: an image keeps its aspect");
    else vt.set("image_size", size, V + "image_size");
    grid_ = patch_ > 0 ? size / patch_ : 0;
    hidden_ = r_.required(V + "embedding_length");
    layers_ = r_.required(V + "block_count");
    vt.set("hidden", hidden_, V + "embedding_length");
    vt.set("layers", layers_, V + "block_count: the layers the file holds");
    vt.set("heads", r_.required(V + "attention.head_count"), V + "attention.head_count");
    vt.set("intermediate", r_.required(V + "feed_forward_length"), V + "feed_forward_length");
    const std::string eps_key = V + "attention.layer_norm_epsilon";
    eps_ = r_.number(eps_key).value_or(0);
    if (!r_.value(eps_key)) r_.problem(eps_key + ": missing");
    // The text model's width, which the projector writes.
    if (const auto dim = r_.integer(V + "projection_dim"); dim && family_ != Family::Llava && *dim != text_.dims.hidden)
      r_.problem(V + "projection_dim " + std::to_string(*dim) + " is not the text model's width (" +
                 std::to_string(text_.dims.hidden) + ", its embedding_length): not this model's projector");
  }

  void tower() {
    TomlTable& vt = doc_.table("vision");
    TomlTable& norm = doc_.table("vision.norm");
    TomlTable& mlp = doc_.table("vision.mlp");
    using spec::Activation;
    const auto activation = [&](Activation a, const std::string& why) { mlp.set("activation", spec::name(a), why); };
    switch (family_) {
      case Family::Llava:
        vt.set("positions", "learned", "v.position_embd: a learned position for the class token and each patch");
        vt.set("class_token", r_.has("v.class_embd"), "v.class_embd");
        vt.set("pre_norm", r_.has("v.pre_ln.weight"), "v.pre_ln");
        vt.set("post_norm", r_.has("v.post_ln.weight"), "v.post_ln (the LLaVA converter drops it)");
        norm.set("kind", "layernorm").set("eps", eps_, "clip.vision.attention.layer_norm_epsilon");
        activation(flag("clip.use_gelu") ? Activation::GeluErf : Activation::GeluQuick,
                   "clip.use_gelu: GELU, else CLIP's quick GELU");
        mlp.set("gated", false, "ffn_up, the activation, ffn_down");
        break;
      case Family::Gemma3:
        vt.set("positions", "learned", "v.position_embd: a learned position for each patch");
        vt.set("patch_bias", r_.has("v.patch_embd.bias"), "v.patch_embd.bias");
        vt.set("post_norm", r_.has("v.post_ln.weight"), "v.post_ln: Gemma 3 reads the tower's last state");
        norm.set("kind", "layernorm").set("eps", eps_, "clip.vision.attention.layer_norm_epsilon");
        activation(Activation::GeluTanh, "mtmd's gemma3: SigLIP's tanh GELU");
        mlp.set("gated", false, "ffn_up, the activation, ffn_down");
        break;
      case Family::Pixtral:
        vt.set("positions", "rope_2d", "mtmd's pixtral: 2D RoPE, each head's pairs split between row and column");
        vt.set("rope_theta", 10000.0, "mtmd's pixtral: 10000, hard-coded");
        vt.set("rope_pairing", "interleaved", "the converter permutes q/k rows for adjacent pairs");
        vt.set("pre_norm", r_.has("v.pre_ln.weight"), "v.pre_ln");
        norm.set("kind", "rmsnorm").set("eps", eps_, "clip.vision.attention.layer_norm_epsilon");
        activation(flag("clip.use_silu") ? Activation::SiLU : Activation::GeluErf, "clip.use_silu, else clip.use_gelu");
        mlp.set("gated", true, "ffn_gate, ffn_up, ffn_down");
        break;
    }
    doc_.table("vision.attention").set("bias", r_.has(t0("attn_q.bias")), t0("attn_q.bias"));
    mlp.set("bias", r_.has(t0("ffn_up.bias")), t0("ffn_up.bias"));
    // LLaVA's converter names fc1 ffn_down and fc2 ffn_up; mtmd swaps them
    // back when ffn_down maps the width to the intermediate one.
    if (const weights::TensorInfo* down = tensor(t0("ffn_down.weight"));
        down && family_ != Family::Pixtral && down->shape.size() == 2 && down->shape[1] == hidden_ &&
        down->shape[0] != hidden_)
      doc_.table("vision.weights.names")
          .set("up", kLegacyUp, "ffn_down maps the width up: fc1 (the LLaVA converter's names)")
          .set("down", kLegacyDown);
    if (family_ == Family::Llava) {
      // clip.vision.feature_layer: the hidden state read, from 0; absent, the
      // converter has dropped the layers after it.
      const std::string key = "clip.vision.feature_layer";
      const GgufValue* v = r_.value(key);
      const auto* list = v ? std::get_if<weights::GgufArray>(&v->value) : nullptr;
      if (v == nullptr) {
        vt.set("feature_layer", -1, "no " + key + ": the converter kept the layers up to the feature layer");
      } else if (list == nullptr || list->items.size() != 1) {
        r_.problem(key + ": one hidden state expected (features of several layers side by side are not read)");
      } else {
        const auto n = std::visit(
            [](const auto& x) -> int64_t {
              if constexpr (std::is_integral_v<std::decay_t<decltype(x)>>) return static_cast<int64_t>(x);
              else return -1;
            },
            list->items.front().value);
        if (n < 0 || n > layers_)
          r_.problem(key + ": hidden state " + std::to_string(n) + " of a " + std::to_string(layers_) +
                     "-layer tower (0 … " + std::to_string(layers_) + ")");
        else vt.set("feature_layer", n, key);
      }
      vt.set("drop_class_token", true, "mtmd's LLaVA drops the class token's row");
    } else {
      vt.set("feature_layer", -1, "the tower's last state");
    }
  }

  // The projector's output must be the text model's width.
  void check_width(const std::string& name, int64_t width) {
    if (width != text_.dims.hidden)
      r_.problem(name + ": writes rows of " + std::to_string(width) + ", the text model's width is " +
                 std::to_string(text_.dims.hidden) + " (its embedding_length): not this model's projector");
  }

  void projector() {
    TomlTable& p = doc_.table("vision.projector");
    const std::string first = family_ == Family::Pixtral ? "mm.1" : "mm.0";
    switch (family_) {
      case Family::Gemma3: {
        p.set("kind", "pooled", "mtmd's gemma3: average pooling, mm.soft_emb_norm, mm.input_projection");
        const std::string key = "clip.vision.projector.scale_factor";
        const int64_t scale = r_.integer(key).value_or(4);
        if (scale < 1 || grid_ % scale != 0) {
          r_.problem(key + " " + std::to_string(scale) + " does not divide the " + std::to_string(grid_) +
                     " patches a side");
        } else {
          p.set("tokens", (grid_ / scale) * (grid_ / scale),
                "(patches a side / " + std::to_string(scale) + ")², " +
                    (r_.value(key) ? key : "no " + key + ": 4, mtmd's default"));
        }
        p.set("norm", "rmsnorm", "mm.soft_emb_norm");
        p.set("norm_unit_offset", false, "the converter stores Gemma's 1 + w");
        p.set("eps", eps_, "clip.vision.attention.layer_norm_epsilon: the pooled norm's too");
        if (const weights::TensorInfo* in = tensor("mm.input_projection.weight"); in && in->shape.size() == 2)
          check_width("mm.input_projection.weight", in->shape[1]);
        return;
      }
      case Family::Pixtral:
        if (r_.has("mm.patch_merger.weight")) {
          p.set("kind", "merge_mlp", "mm.input_norm, mm.patch_merger, mm.1, the activation, mm.2 (Mistral 3)");
          const std::string key = "clip.vision.spatial_merge_size";
          p.set("merge", r_.integer(key).value_or(2), key);
          if (!r_.value(key)) r_.problem(key + ": missing (mm.patch_merger merges its blocks of patches)");
          p.set("norm", "rmsnorm", "mm.input_norm");
          p.set("eps", text_.norm.eps, "the text model's norm epsilon, as Mistral3MultiModalProjector's");
          break;
        }
        p.set("kind", "mlp", "mm.1, the activation, mm.2");
        break;
      case Family::Llava: p.set("kind", "mlp", "mm.0, the activation, mm.2"); break;
    }
    p.set("activation", spec::name(spec::Activation::GeluErf), "mtmd: GELU between the projector's linears");
    p.set("bias", r_.has(first + ".bias"), first + ".bias");
    if (const weights::TensorInfo* in = tensor(first + ".weight"); in && in->shape.size() == 2)
      p.set("intermediate", in->shape[0], first + ".weight rows");
    if (const weights::TensorInfo* out = tensor("mm.2.weight"); out && out->shape.size() == 2)
      check_width("mm.2.weight", out->shape[0]);
  }

  // An image token's id, by its text in the text file's vocabulary.
  std::optional<int64_t> token(const std::string& text, const std::string& why, bool required = true) {
    // As it is (SentencePiece vocabularies), or byte-level as a gpt2 one
    // spells "\n\n" ("ĊĊ").
    for (const std::string& spelled : {text, text::byte_level_encode(text)}) {
      const auto it = std::find(vocabulary_.begin(), vocabulary_.end(), spelled);
      if (it != vocabulary_.end()) return it - vocabulary_.begin();
    }
    if (required)
      text_problems_.push_back(text_file_ + ": tokenizer.ggml.tokens" +
                 (vocabulary_.empty() ? " is missing, and it must hold " : " holds no ") + json_text(text) + ", " + why);
    return std::nullopt;
  }
  static std::string json_text(const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
    return out + "\"";
  }

  void tokens() {
    TomlTable& k = doc_.table("vision.tokens");
    const std::string from = "the text file's tokenizer.ggml.tokens: ";
    switch (family_) {
      case Family::Llava:
        if (const auto marker = token("<image>", "the image marker LLaVA's prompts hold"))
          k.set("marker", *marker, from + "<image>");
        break;
      case Family::Gemma3: {
        const auto boi = token("<start_of_image>", "the image marker Gemma 3's prompts hold");
        const auto image = token("<image_soft_token>", "the token an image's rows replace");
        const auto eoi = token("<end_of_image>", "the token after an image");
        const auto newline = token("\n\n", "", false);
        if (boi) k.set("marker", *boi, from + "<start_of_image>");
        if (image) k.set("image", *image, from + "<image_soft_token>");
        doc_.table("vision").set("image_bidirectional", true,
                                 "mtmd's gemma3: an image's tokens attend to each other both ways");
        if (boi && eoi) {
          if (newline) {
            k.set("prefix", std::vector<int64_t>{*newline, *boi}, from + "\"\\n\\n\" and <start_of_image>");
            k.set("suffix", std::vector<int64_t>{*eoi, *newline}, from + "<end_of_image> and \"\\n\\n\"");
          } else {
            k.set("prefix", std::vector<int64_t>{*boi}, from + "<start_of_image>");
            k.set("suffix", std::vector<int64_t>{*eoi}, from + "<end_of_image>");
          }
        }
        break;
      }
      case Family::Pixtral: {
        if (const auto image = token("[IMG]", "the image marker Pixtral's prompts hold")) {
          k.set("marker", *image, from + "[IMG]");
          k.set("image", *image, from + "[IMG], a feature row each");
        }
        if (const auto row_end = token("[IMG_BREAK]", "the token after each row of an image"))
          k.set("row_end", *row_end, from + "[IMG_BREAK]");
        if (const auto end = token("[IMG_END]", "the token after an image's last row"))
          k.set("end", *end, from + "[IMG_END]");
        break;
      }
    }
  }

  // The tower's dtypes: its matrices' most common one, the others by role.
  void weights() {
    TomlTable& w = doc_.table("vision.weights");
    std::map<DType, int64_t> count;
    for (const auto& [name, t] : r_.tensors())
      if (t->shape.size() >= 2) ++count[t->dtype];
    DType dtype = DType::F32;
    for (const auto& [d, n] : count)
      if (n > count[dtype]) dtype = d;
    w.set("dtype", std::string(dtype_name(dtype)), "the mmproj's matrices");
    w.set("preset", "gguf");
    if (r_.has(kImgBreak))
      w.set("ignore", std::vector<std::string>{kImgBreak}, "the text model's [IMG_BREAK] row, which it holds itself");
  }

  TomlDoc& doc_;
  Reader& r_;
  const spec::Spec& text_;
  const std::vector<std::string>& vocabulary_;
  std::string text_file_;
  Family family_ = Family::Llava;
  int64_t patch_ = 0, grid_ = 0, hidden_ = 0, layers_ = 0;
  double eps_ = 0;

 public:
  std::vector<std::string> text_problems_;  // of the text file's vocabulary
};

}  // namespace

void import_mmproj_metadata(TomlDoc& doc, const std::map<std::string, GgufValue, std::less<>>& metadata,
                            const std::vector<weights::TensorInfo>& tensors, const spec::Spec& text,
                            const std::vector<std::string>& vocabulary, const std::string& text_file,
                            const std::string& file) {
  Reader r(metadata, tensors, file);
  MmprojReader reader(doc, r, text, vocabulary, text_file);
  reader.run();
  std::vector<std::string> problems = r.problems();
  problems.insert(problems.end(), reader.text_problems_.begin(), reader.text_problems_.end());
  if (!problems.empty()) throw ImportError(problems);
}

}  // namespace lathe::importer
