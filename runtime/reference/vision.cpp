// The reference's images: a vision tower over an image's patches, its
// projector, and a prompt pass whose rows take the projected features
// (transformers' LlavaForConditionalGeneration, Mistral3ForConditionalGeneration
// and Gemma3ForConditionalGeneration, their towers CLIPVisionModel,
// PixtralVisionModel and SiglipVisionModel).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/reference/reference.hpp"

namespace lathe::reference {

using spec::ProjectorKind;
using spec::Role;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

int64_t Reference::image_rows(int64_t height, int64_t width) const {
  return spec_.vision.image_features(height / spec_.vision.patch, width / spec_.vision.patch);
}

std::vector<float> Reference::image_features(std::span<const float> pixels, int64_t height, int64_t width) const {
  if (!tower_) throw std::invalid_argument("reference: image_features() needs a spec with [vision]");
  const spec::Vision& v = spec_.vision;
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

  // The patch embedding: a convolution of stride patch, each patch's values
  // in the weight's order (channel, row, column).
  Linear patch;
  patch.weight = tensor(Role::PatchEmbed, false, -1);
  patch.bias = optional(Role::PatchEmbed, true, -1);
  patch.out = hidden;
  patch.in = channels * p * p;
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
      size_t i = 0;
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t y = 0; y < p; ++y)
          for (int64_t xx = 0; xx < p; ++xx)
            values[i++] = static_cast<double>(pixels[static_cast<size_t>((ch * height + r * p + y) * width + c * p + xx)]);
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
  t.run_layers(t.stack_, x, positions, t.stack_.first + static_cast<size_t>(v.layers_run()));
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
