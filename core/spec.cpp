#include <cmath>

#include "core/spec.hpp"

namespace lathe::spec {

const char* name(NormKind v) { return spelling(v).key.data(); }
const char* name(NormPlacement v) { return spelling(v).key.data(); }
const char* name(Activation v) { return spelling(v).key.data(); }
const char* name(QKNorm v) { return spelling(v).key.data(); }
const char* name(PositionKind v) { return spelling(v).key.data(); }
const char* name(RopePairing v) { return spelling(v).key.data(); }
const char* name(RopeScaling v) { return spelling(v).key.data(); }
const char* name(FusedGateUp v) { return spelling(v).key.data(); }
const char* name(MoeScoring v) { return spelling(v).key.data(); }
const char* name(GroupScore v) { return spelling(v).key.data(); }
const char* name(Stack v) { return spelling(v).key.data(); }
const char* name(SsmKind v) { return spelling(v).key.data(); }
const char* name(Pooling v) { return spelling(v).key.data(); }
const char* name(DType v) { return spelling(v).key.data(); }
const char* name(Layout v) { return spelling(v).key.data(); }
const char* name(QkvLayout v) { return spelling(v).key.data(); }
const char* name(VisionConnection v) { return spelling(v).key.data(); }
const char* name(VisionPositions v) { return spelling(v).key.data(); }
const char* name(ProjectorKind v) { return spelling(v).key.data(); }

double bytes_per_element(DType v) {
  const DTypeLayout layout = dtype_layout(v);  // block types: the block's bytes spread over its values
  return static_cast<double>(layout.bytes) / static_cast<double>(layout.elements);
}

const char* name(Role r) { return spelling(r).key.data(); }

std::optional<Role> role_from_name(const std::string& word) {
  return from_key<Role>(word);
}

std::vector<std::string> role_names() {
  std::vector<std::string> out;
  for (const Spelling<Role>& n : kRoleSpellings) out.emplace_back(n.key);
  return out;
}

double Attention::effective_scale(int64_t head_dim) const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

Loc Spec::where(const std::string& path) const {
  // The key itself, else the nearest enclosing table that was written.
  std::string p = path;
  while (true) {
    auto it = locations.find(p);
    if (it != locations.end()) return it->second;
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) return Loc{};
    p.resize(dot);
  }
}

int64_t cache_row_bytes(const Spec& s) {
  return s.dims.kv_heads * s.dims.head_dim * static_cast<int64_t>(bytes_per_element(s.cache.dtype));
}

int64_t v_cache_row_bytes(const Spec& s) { return s.mla.enabled ? 0 : cache_row_bytes(s); }

double yarn_mscale(double factor, double k) { return factor <= 1.0 ? 1.0 : 0.1 * k * std::log(factor) + 1.0; }

Spec vision_tower(const Spec& s) {
  const Vision& v = s.vision;
  Spec t;
  t.file = s.file;
  t.name = s.name + ".vision";
  t.stack = Stack::Encoder;
  t.dims = v.dims;
  t.dims.vocab = 0;
  t.norm = v.norm;
  t.norm.final_norm = v.post_norm;
  t.attention = v.attention;
  t.mlp = v.mlp;
  // A tiled tower's gated position tables are its own (build_vision_manifest).
  t.position.kind = v.tiles > 0                               ? PositionKind::None
                    : v.positions == VisionPositions::Rope2D ? PositionKind::Rope
                                                               : PositionKind::Learned;
  t.position.theta = v.rope_theta;
  t.position.pairing = v.rope_pairing;
  t.position.rotary_dim = v.dims.head_dim;
  t.position.rope_grid = v.positions == VisionPositions::Rope2D && v.tiles == 0 ? v.grid() : 0;
  t.position.table_size = v.positions_count();
  t.embedding.norm = v.pre_norm;
  t.weights = v.weights;
  t.cache.dtype = s.cache.dtype;
  // The projector the tower's build runs after its layers (its pooled
  // norm's settings); the tower itself takes no images (enabled is false).
  t.vision.projector = v.projector;
  return t;
}

Spec vision_global_layers(const Spec& s) {
  Spec g = vision_tower(s);
  g.name = s.name + ".vision.global";
  g.dims.layers = s.vision.global_layers;
  g.weights.names = s.vision.weights.encoder_names;
  g.position.kind = PositionKind::None;
  g.embedding.norm = false;
  g.norm.final_norm = false;
  return g;
}

}  // namespace lathe::spec
