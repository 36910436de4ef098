// The reference's images: a vision tower over an image's patches, its
// projector, and a prompt pass whose rows take the projected features
// (transformers' LlavaForConditionalGeneration, Mistral3ForConditionalGeneration
// and Gemma3ForConditionalGeneration, their towers CLIPVisionModel,
// PixtralVisionModel and SiglipVisionModel), or whose cross-attention layers
// read them (MllamaForConditionalGeneration, its tiled MllamaVisionModel).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "runtime/reference/reference.hpp"

namespace lathe::reference {

using spec::ProjectorKind;
using spec::Role;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The values of patch (r, c) of a [channels][height][width] image (null: a
// zero tile) in a convolution weight's order: channel, row, column.
void patch_values(const float* pixels, int64_t channels, int64_t height, int64_t width, int64_t p, int64_t r, int64_t c,
                  std::vector<double>& values) {
  size_t i = 0;
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t y = 0; y < p; ++y)
      for (int64_t x = 0; x < p; ++x)
        values[i++] = pixels ? static_cast<double>(pixels[(ch * height + r * p + y) * width + c * p + x]) : 0.0;
}

// An RMS norm of each `width`-wide head of `values` (Mllama's q_norm and k_norm).
void norm_heads(std::vector<double>& values, const float* weight, int64_t width, double eps) {
  for (size_t start = 0; start < values.size(); start += static_cast<size_t>(width)) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>(start);
    const std::vector<double> normed =
        norm_values(spec::NormKind::RMSNorm, eps, false, weight, nullptr, std::vector<double>(first, first + width));
    std::copy(normed.begin(), normed.end(), first);
  }
}

}  // namespace

Reference::Linear Reference::patch_embedding() const {
  const spec::Vision& v = spec_.vision;
  Linear patch;
  patch.weight = tensor(Role::PatchEmbed, false, -1);
  patch.bias = optional(Role::PatchEmbed, true, -1);
  patch.out = v.dims.hidden;
  patch.in = v.channels * v.patch * v.patch;
  return patch;
}

int64_t Reference::image_rows(int64_t height, int64_t width) const {
  return spec_.vision.image_features(height / spec_.vision.patch, width / spec_.vision.patch);
}

std::vector<float> Reference::image_features(std::span<const float> pixels, int64_t height, int64_t width) const {
  if (!tower_) throw std::invalid_argument("reference: image_features() needs a spec with [vision]");
  const spec::Vision& v = spec_.vision;
  if (v.tiles > 0) throw std::invalid_argument("reference: a tiled tower's images go through tile_features()");
  const int64_t p = v.patch, channels = v.channels, hidden = v.dims.hidden;
  const bool fixed = v.image_size > 0;
  const std::string size = str(height) + " × " + str(width);
  if (fixed && (height != v.image_size || width != v.image_size))
    throw std::invalid_argument("reference: an image of " + size + " pixels; the tower takes " + str(v.image_size) + "²");
  if (!fixed && (height <= 0 || width <= 0 || height % p != 0 || width % p != 0 || std::max(height, width) > v.longest_edge))
    throw std::invalid_argument("reference: an image of " + size + " pixels; the tower takes whole patches of " + str(p) +
                                " up to " + str(v.longest_edge) + " a side");
  if (static_cast<int64_t>(pixels.size()) != channels * height * width)
    throw std::invalid_argument("reference: " + str(static_cast<int64_t>(pixels.size())) + " pixel values for " +
                                str(channels) + " channels of " + size);
  const int64_t grid_rows = height / p, grid_cols = width / p;

  // The patch embedding: a convolution of stride patch.
  const Linear patch = patch_embedding();
  std::vector<std::vector<double>> x;
  std::vector<int64_t> positions;  // the table's rows, or a 2D tower's row · side + column
  if (v.class_token) {
    const float* c = tensor(Role::ClassEmbed, false, -1).data;
    x.emplace_back(c, c + hidden);
    positions.push_back(0);
  }
  std::vector<double> values(static_cast<size_t>(patch.in));
  for (int64_t r = 0; r < grid_rows; ++r)
    for (int64_t c = 0; c < grid_cols; ++c) {
      patch_values(pixels.data(), channels, height, width, p, r, c, values);
      x.push_back(apply(patch, values));
      positions.push_back(v.positions == spec::VisionPositions::Rope2D ? r * v.grid() + c
                                                                       : static_cast<int64_t>(positions.size()));
    }
  Reference& t = *tower_;
  if (v.positions == spec::VisionPositions::Learned)
    for (size_t i = 0; i < x.size(); ++i)
      for (int64_t e = 0; e < hidden; ++e)
        x[i][static_cast<size_t>(e)] += static_cast<double>(t.stack_.pos_embed.data[positions[i] * hidden + e]);
  if (v.pre_norm)
    for (std::vector<double>& row : x) row = t.normalize(t.stack_.embed_norm, row);
  t.run_layers(t.stack_, x, positions, t.stack_.first, t.stack_.first + static_cast<size_t>(v.layers_run()));
  if (v.post_norm)  // (validated: the features are the last layer's output)
    for (std::vector<double>& row : x) row = t.normalize(t.stack_.final_norm, row);
  if (v.class_token && v.drop_class_token) x.erase(x.begin());

  std::vector<float> out;
  for (const std::vector<double>& row : project_features(std::move(x), grid_rows, grid_cols))
    for (double value : row) out.push_back(static_cast<float>(value));
  return out;
}

std::vector<std::vector<double>> Reference::project_features(std::vector<std::vector<double>> rows, int64_t grid_rows,
                                                             int64_t grid_cols) const {
  const spec::Vision& v = spec_.vision;
  const spec::Projector& j = v.projector;
  const size_t hidden = static_cast<size_t>(v.dims.hidden);
  const float* norm_w = optional(Role::ProjNorm, false, -1);  // merge_mlp and pooled
  const float* norm_b = optional(Role::ProjNorm, true, -1);
  const auto norm = [&](const std::vector<double>& row) {
    return norm_values(j.norm, j.eps, j.norm_unit_offset, norm_w, norm_b, row);
  };
  const bool two_linears = j.kind == ProjectorKind::Mlp || j.kind == ProjectorKind::MergeMlp;
  const Linear in = j.kind == ProjectorKind::Pooled ? Linear{} : linear(Role::ProjIn, -1);
  const Linear out_w = two_linears ? linear(Role::ProjOut, -1) : Linear{};
  const auto mlp = [&](const std::vector<double>& row) {
    std::vector<double> a = apply(in, row);
    for (double& value : a) value = activation(j.activation, value);
    return apply(out_w, a);
  };
  std::vector<std::vector<double>> out;
  switch (j.kind) {
    case ProjectorKind::Mlp:
      for (const std::vector<double>& row : rows) out.push_back(mlp(row));
      break;
    case ProjectorKind::MergeMlp: {
      // Mistral3PatchMerger: each merge × merge block of the normed grid,
      // as unfold lays it out (channel-major, then the block's row and
      // column), through merging_layer; then the mlp.
      for (std::vector<double>& row : rows) row = norm(row);
      const int64_t m = j.merge;
      const Linear merging = linear(Role::PatchMerge, -1);
      std::vector<double> block(hidden * static_cast<size_t>(m * m));
      for (int64_t br = 0; br < grid_rows / m; ++br)
        for (int64_t bc = 0; bc < grid_cols / m; ++bc) {
          for (size_t c = 0; c < hidden; ++c)
            for (int64_t ki = 0; ki < m; ++ki)
              for (int64_t kj = 0; kj < m; ++kj)
                block[c * static_cast<size_t>(m * m) + static_cast<size_t>(ki * m + kj)] =
                    rows[static_cast<size_t>((br * m + ki) * grid_cols + bc * m + kj)][c];
          out.push_back(mlp(apply(merging, block)));
        }
      break;
    }
    case ProjectorKind::Pooled: {
      // Gemma3MultiModalProjector: the grid averaged in square blocks down
      // to tokens_per_side², normed, times mm_input_projection_weight [in, out].
      const int64_t side = j.pooled_side(), k = grid_rows / side;
      Linear projection;
      projection.weight = tensor(Role::ProjIn, false, -1);
      projection.transposed = true;
      projection.in = projection.weight.shape.at(0);
      projection.out = projection.weight.shape.at(1);
      for (int64_t br = 0; br < side; ++br)
        for (int64_t bc = 0; bc < side; ++bc) {
          std::vector<double> mean(hidden, 0.0);
          for (int64_t ki = 0; ki < k; ++ki)
            for (int64_t kj = 0; kj < k; ++kj) {
              const std::vector<double>& row = rows[static_cast<size_t>((br * k + ki) * grid_cols + bc * k + kj)];
              for (size_t c = 0; c < hidden; ++c) mean[c] += row[c];
            }
          for (double& value : mean) value /= static_cast<double>(k * k);
          out.push_back(apply(projection, norm(mean)));
        }
      break;
    }
    case ProjectorKind::Linear:
      for (const std::vector<double>& row : rows) out.push_back(apply(in, row));
      break;
  }
  return out;
}

std::vector<float> Reference::forward(const std::vector<int32_t>& tokens, const std::vector<int64_t>& at,
                                      const std::vector<float>& features) {
  const size_t hidden = static_cast<size_t>(spec_.dims.hidden);
  if (features.size() != at.size() * hidden)
    throw std::invalid_argument("reference: " + str(static_cast<int64_t>(features.size())) + " feature values for " +
                                str(static_cast<int64_t>(at.size())) + " rows of " + str(static_cast<int64_t>(hidden)));
  for (size_t i = 0; i < at.size(); ++i)
    if (at[i] < 0 || at[i] >= static_cast<int64_t>(tokens.size()) || (i > 0 && at[i] <= at[i - 1]))
      throw std::invalid_argument("reference: spliced rows must be increasing indices into the tokens");
  if (spec_.ssm.enabled() || spec_.encoder() || spec_.encoder_decoder())
    throw std::invalid_argument("reference: spliced rows feed a decoder's prompt");
  if (spec_.vision.connection == spec::VisionConnection::CrossAttention)
    throw std::invalid_argument("reference: a cross_attention [vision] reads its images through forward_images()");
  begin_pass(tokens);
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<std::vector<double>> x;
  std::vector<int64_t> first(static_cast<size_t>(T)), last(static_cast<size_t>(T));
  size_t next = 0;  // the next spliced row
  for (int64_t i = 0; i < T; ++i) {
    const bool spliced = next < at.size() && at[next] == i;
    x.push_back(embed_row(stack_, tokens[static_cast<size_t>(i)], cache_len_ + i,
                          spliced ? features.data() + next * hidden : nullptr));
    first[static_cast<size_t>(i)] = last[static_cast<size_t>(i)] = i;
    if (spliced) ++next;
  }
  // Each run of consecutive spliced rows, an image, attends to itself both ways.
  if (spec_.vision.image_bidirectional)
    for (size_t a = 0; a < at.size();) {
      size_t b = a;
      while (b + 1 < at.size() && at[b + 1] == at[b] + 1) ++b;
      for (size_t i = a; i <= b; ++i) {
        first[static_cast<size_t>(at[i])] = at[a];
        last[static_cast<size_t>(at[i])] = at[b];
      }
      a = b + 1;
    }
  std::vector<float> logits(static_cast<size_t>(T * spec_.dims.vocab));
  prefill_rows(std::move(x), first, last, logits.data());
  return logits;
}

std::vector<float> Reference::tile_features(std::span<const float> pixels, int64_t tiles, int64_t aspect_ratio_id) const {
  const spec::Vision& v = spec_.vision;
  if (!tower_ || v.tiles == 0) throw std::invalid_argument("reference: tile_features() needs a spec with vision.tiles");
  const int64_t T = v.tiles, size = v.image_size, p = v.patch, channels = v.channels, h = v.dims.hidden;
  if (tiles < 1 || tiles > T)
    throw std::invalid_argument("reference: an image of " + str(tiles) + " tiles; the tower takes 1 to " + str(T));
  if (aspect_ratio_id < 1 || aspect_ratio_id > v.aspect_ratios())
    throw std::invalid_argument("reference: aspect ratio id " + str(aspect_ratio_id) + "; the tower's are 1 to " +
                                str(v.aspect_ratios()));
  const int64_t tile_values = channels * size * size;
  if (static_cast<int64_t>(pixels.size()) != tiles * tile_values)
    throw std::invalid_argument("reference: " + str(static_cast<int64_t>(pixels.size())) + " pixel values for " +
                                str(tiles) + " tiles of " + str(channels) + " × " + str(size) + "²");
  const int64_t grid = size / p, n = grid * grid + 1;
  // A tile's rows, padded (the padding rows run through the layers with the rest).
  const int64_t rows = n + spec::tile_padding(n);

  // MllamaPrecomputedAspectRatioEmbedding's and MllamaPrecomputedPositionEmbedding's
  // rows of this aspect ratio, each table's tanh gate.
  const auto gate = [&](Role role) { return std::tanh(static_cast<double>(*tensor(role, false, -1).data)); };
  const double pre_gate = gate(Role::PreTileGate), post_gate = gate(Role::PostTileGate), pos_gate = gate(Role::PosGate);
  const float* pre = tensor(Role::PreTileEmbed, false, -1).data + aspect_ratio_id * T * h;
  const float* post = tensor(Role::PostTileEmbed, false, -1).data + aspect_ratio_id * T * h;
  const float* tile_pos = tensor(Role::TilePosEmbed, false, -1).data + aspect_ratio_id * T * n * h;
  const float* cls = tensor(Role::ClassEmbed, false, -1).data;
  const Linear patch = patch_embedding();
  Reference& t = *tower_;

  // Every tile's rows, the tiles past the image's zeros: the patches with
  // the tile's pre-tile embedding, the class token before them, the
  // positions (the shared table and the tile's own, gated), the pre-norm;
  // then the padding rows, zeros. `real`: the image's own tiles' rows
  // before the padding, which alone the other rows may not ignore.
  std::vector<std::vector<double>> x(static_cast<size_t>(T * rows), std::vector<double>(static_cast<size_t>(h), 0.0));
  std::vector<char> real(x.size(), 0);
  std::vector<double> values(static_cast<size_t>(patch.in));
  for (int64_t tile = 0; tile < T; ++tile) {
    const float* px = tile < tiles ? pixels.data() + tile * tile_values : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> row;
      if (i == 0) {
        row.assign(cls, cls + h);
      } else {
        patch_values(px, channels, size, size, p, (i - 1) / grid, (i - 1) % grid, values);
        row = apply(patch, values);
        for (int64_t e = 0; e < h; ++e) row[static_cast<size_t>(e)] += pre_gate * static_cast<double>(pre[tile * h + e]);
      }
      for (int64_t e = 0; e < h; ++e)
        row[static_cast<size_t>(e)] += (1.0 - pos_gate) * static_cast<double>(tile_positions_.data[i * h + e]) +
                                       pos_gate * static_cast<double>(tile_pos[(tile * n + i) * h + e]);
      if (v.pre_norm) row = t.normalize(t.stack_.embed_norm, row);
      x[static_cast<size_t>(tile * rows + i)] = std::move(row);
      real[static_cast<size_t>(tile * rows + i)] = tile < tiles;
    }
  }

  // The local layers, keeping the hidden states the features read beside
  // the last (extra_feature_layers, 0 the layers' input); the post-norm and
  // post-tile embedding; the global layers.
  const std::vector<int64_t> positions(x.size(), 0);  // (learned positions: no angle)
  const std::vector<int64_t>& extra = v.extra_feature_layers;
  std::vector<std::vector<std::vector<double>>> states(extra.size());
  for (int64_t state = 0;; ++state) {
    for (size_t k = 0; k < extra.size(); ++k)
      if (extra[k] == state) states[k] = x;
    if (state == v.layers_run()) break;
    const size_t layer = t.stack_.first + static_cast<size_t>(state);
    t.run_layers(t.stack_, x, positions, layer, layer + 1, &real);
  }
  for (int64_t tile = 0; tile < T; ++tile)
    for (int64_t i = 0; i < rows; ++i) {
      std::vector<double>& row = x[static_cast<size_t>(tile * rows + i)];
      if (v.post_norm) row = t.normalize(t.stack_.final_norm, row);
      for (int64_t e = 0; e < h; ++e) row[static_cast<size_t>(e)] += post_gate * static_cast<double>(post[tile * h + e]);
    }
  if (global_) global_->run_layers(global_->stack_, x, positions, global_->stack_.first, global_->stack_.end, &real);

  // Each tile's rows but its padding: the last state, then the kept ones
  // interleaved channel by channel (torch.stack(states, -1) flattened).
  std::vector<std::vector<double>> features;
  for (int64_t tile = 0; tile < T; ++tile)
    for (int64_t i = 0; i < n; ++i) {
      const size_t r = static_cast<size_t>(tile * rows + i);
      std::vector<double> row = x[r];
      for (int64_t e = 0; e < h; ++e)
        for (const std::vector<std::vector<double>>& s : states) row.push_back(s[r][static_cast<size_t>(e)]);
      features.push_back(std::move(row));
    }
  std::vector<float> out;
  for (const std::vector<double>& row : project_features(std::move(features), grid, grid))
    for (double value : row) out.push_back(static_cast<float>(value));
  return out;
}

std::vector<float> Reference::forward_images(const std::vector<int32_t>& tokens, const std::vector<float>& features,
                                             const std::vector<int64_t>& tiles) {
  const spec::Vision& v = spec_.vision;
  if (v.connection != spec::VisionConnection::CrossAttention)
    throw std::invalid_argument("reference: forward_images() runs a cross_attention [vision] (Llama 3.2 Vision)");
  if (cache_len_ != 0) throw std::invalid_argument("reference: images go in a sequence's first prompt (reset() first)");
  std::vector<int64_t> markers;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] == v.tokens.marker) markers.push_back(static_cast<int64_t>(i));
  const size_t images = markers.size();
  if (tiles.size() != images)
    throw std::invalid_argument("reference: " + str(static_cast<int64_t>(images)) + " image markers (token " +
                                str(v.tokens.marker) + ") for " + str(static_cast<int64_t>(tiles.size())) + " images");
  const int64_t per_tile = v.image_features(v.grid(), v.grid()), per_image = v.tiles * per_tile;
  const int64_t hidden = spec_.dims.hidden;
  if (static_cast<int64_t>(features.size()) != static_cast<int64_t>(images) * per_image * hidden)
    throw std::invalid_argument("reference: " + str(static_cast<int64_t>(features.size())) + " feature values for " +
                                str(static_cast<int64_t>(images)) + " images of " + str(per_image) + " rows of " +
                                str(hidden));
  for (int64_t n : tiles)
    if (n < 1 || n > v.tiles)
      throw std::invalid_argument("reference: an image of " + str(n) + " tiles; the tower takes 1 to " + str(v.tiles));
  begin_pass(tokens);

  // Each cross-attention layer's keys (q/k-normed per head) and values of every image row.
  for (size_t l = stack_.first; l < stack_.end; ++l) {
    Layer& L = layers_[l];
    if (!L.image_cross) continue;
    L.cross_k_cache.clear();
    L.cross_v_cache.clear();
    for (size_t r = 0; r < images * static_cast<size_t>(per_image); ++r) {
      const std::vector<double> row(features.begin() + static_cast<std::ptrdiff_t>(r) * hidden,
                                    features.begin() + static_cast<std::ptrdiff_t>(r + 1) * hidden);
      std::vector<double> k = apply(L.cross_k, row);
      norm_heads(k, L.cross_k_norm.weight, spec_.dims.head_dim, spec_.norm.eps);
      const std::vector<double> value = apply(L.cross_v, row);
      L.cross_k_cache.insert(L.cross_k_cache.end(), k.begin(), k.end());
      L.cross_v_cache.insert(L.cross_v_cache.end(), value.begin(), value.end());
    }
  }

  // MllamaProcessor's spans: image i from its marker up to the next
  // image's, a run of adjacent markers each up to where the run's last ends.
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> end(images, T);
  for (size_t i = images; i-- > 1;) {
    end[i - 1] = markers[i];
    if (markers[i - 1] + 1 == markers[i]) end[i - 1] = end[i];
  }
  const int64_t vocab = spec_.dims.vocab;
  std::vector<float> logits(static_cast<size_t>(T * vocab));
  for (int64_t row = 0; row < T; ++row) {
    if (images > 0) {
      cross_allowed_.assign(images * static_cast<size_t>(per_image), 0);
      cross_open_ = false;
      for (size_t i = 0; i < images; ++i) {
        if (row < markers[i] || row >= end[i]) continue;
        cross_open_ = true;
        std::fill_n(cross_allowed_.begin() + static_cast<std::ptrdiff_t>(i) * per_image, tiles[i] * per_tile, 1);
      }
    }
    token(tokens[static_cast<size_t>(row)], cache_len_, logits.data() + row * vocab);
    ++cache_len_;
  }
  return logits;
}

void Reference::image_cross_block(const Layer& L, std::vector<double>& x) const {
  const size_t hidden = static_cast<size_t>(spec_.dims.hidden);
  std::vector<double> q = apply(L.cross_q, normalize(L.attn_norm, x));
  norm_heads(q, L.cross_q_norm.weight, spec_.dims.head_dim, spec_.norm.eps);
  // A row that reads no image reads every image row (transformers zeroes
  // its mask), and its MLP branch is zeroed.
  const int64_t keys = static_cast<int64_t>(cross_allowed_.size());
  const std::vector<double> o = apply(L.cross_o, attend(L.cross_k_cache, L.cross_v_cache, q, 0, 0, keys - 1, nullptr, {},
                                                        cross_open_ ? &cross_allowed_ : nullptr));
  const double attn_gate = std::tanh(static_cast<double>(*L.attn_gate));
  for (size_t i = 0; i < hidden; ++i) x[i] += attn_gate * o[i];
  if (!cross_open_) return;
  const std::vector<double> down = mlp(L.mlp, normalize(L.mlp_norm, x));
  const double mlp_gate = std::tanh(static_cast<double>(*L.mlp_gate));
  for (size_t i = 0; i < hidden; ++i) x[i] += mlp_gate * down[i];
}

void Reference::prefill_rows(std::vector<std::vector<double>> x, const std::vector<int64_t>& span_first,
                             const std::vector<int64_t>& span_last, float* logits) {
  const int64_t T = static_cast<int64_t>(x.size()), start = cache_len_;
  const spec::Dims& d = spec_.dims;
  const spec::Mla& m = spec_.mla;
  const HeadWidths widths = m.enabled ? HeadWidths{m.qk_head_dim(), m.v_head_dim, d.heads} : HeadWidths{};
  for (size_t l = stack_.first; l < stack_.end; ++l) {
    Layer& L = layers_[l];
    const bool windowed = spec_.attention.windowed(static_cast<int64_t>(l));
    std::vector<std::vector<double>> h(x.size()), q(x.size());
    for (int64_t i = 0; i < T; ++i) {
      const size_t r = static_cast<size_t>(i);
      h[r] = attention_norm_in() && L.attn_norm.weight ? normalize(L.attn_norm, x[r]) : x[r];
      std::vector<double> k, v;
      if (m.enabled) project_mla(L, h[r], start + i, q[r], k, v);
      else project_qkv(L, h[r], start + i, windowed, q[r], k, v);
      L.k_cache.insert(L.k_cache.end(), k.begin(), k.end());
      L.v_cache.insert(L.v_cache.end(), v.begin(), v.end());
    }
    for (int64_t i = 0; i < T; ++i) {
      const size_t r = static_cast<size_t>(i);
      const int64_t p = start + i;
      // Causal (in its window), or its span's rows: HF's masks OR-ed.
      const int64_t causal_first = windowed ? std::max<int64_t>(0, p - spec_.attention.sliding_window + 1) : 0;
      const int64_t first = std::min(causal_first, start + span_first[r]), last = start + span_last[r];
      const std::vector<double> block_in = x[r];
      finish_block(L, static_cast<int64_t>(l), x[r], block_in, h[r],
                   attend(L.k_cache, L.v_cache, q[r], p, first, last, &stack_, widths));
    }
  }
  cache_len_ += T;
  for (int64_t i = 0; i < T; ++i) logits_of(std::move(x[static_cast<size_t>(i)]), logits + i * d.vocab);
}

}  // namespace lathe::reference
