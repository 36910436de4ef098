// Mixture-of-experts routing of a chunk: for each token row, its scores —
// the softmax over its E router logits (f32), or with SIGMOID the sigmoid
// of each (DeepSeek-V3) — the TOPK largest (equal ones by lowest expert
// index, as torch.topk), their weights (renormalized to sum 1 with
// NORM_TOPK, then times ROUTED_SCALE with SCALED); and for each expert, the
// slots t·TOPK + j routed to it, in token order, so that the expert matmuls
// read each expert's weights once per chunk for all of its tokens. One
// subgroup; tokens in turn.
//
// DeepSeek's routing, each part a constant that a Mixtral build leaves off:
// with CORRECTION_BIAS the experts are chosen by score + bias[e] and
// weighted by the score alone (V3's e_score_correction_bias); with GROUPED
// the E experts are GROUPS groups of consecutive ones, each scored by its
// best choosing value (V2) or with GROUP_TOP2 the sum of its best two (V3),
// and only the experts of the TOPK_GROUPS best groups (the lowest among
// equals) are chosen from.
//
// Generated constants: E (experts), TOPK, NORM_TOPK, LOGITS_STRIDE (E, or
// more when the logits share their matmul with other rows), SIGMOID,
// CORRECTION_BIAS, GROUPED, GROUPS, TOPK_GROUPS, GROUP_TOP2, SCALED,
// ROUTED_SCALE.
// Push constants (RowsPush): rows.
// Buffers: logits [rows][LOGITS_STRIDE] f32, the router's first; route
//          (words): counts[E]; A, the number of
//          experts with tokens, and those experts ascending (E words);
//          weights[rows·TOPK] (f32 bits) at 2E + 1; per expert e its rows
//          slots at 2E + 1 + rows·TOPK + e·rows; bias [E] f32 (declared
//          only with CORRECTION_BIAS: a Mixtral build's SPIR-V is as before).

layout(local_size_x_id = 0) in;

layout(std430, binding = BINDING_logits) readonly buffer L { float logits[]; };
layout(std430, binding = BINDING_route) buffer R { uint route[]; };
#if CORRECTION_BIAS
layout(std430, binding = BINDING_bias) readonly buffer B { float bias[]; };
#endif

const uint LANES = gl_WorkGroupSize.x;
const uint PER_LANE = (E + LANES - 1) / LANES;  // lane l holds experts l, l + LANES, …
const uint NONE = 0xffffffffu;
const float NEG_INF = -1.0 / 0.0;
#if GROUPED
const uint GROUP = E / GROUPS;  // experts a group
#endif

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint rows = pc.rows;
  const uint weights = 2u * E + 1u;
  const uint lists = weights + rows * TOPK;
  for (uint e = lane; e < E; e += LANES) route[e] = 0u;
  subgroupMemoryBarrierBuffer();
  subgroupBarrier();
  for (uint t = 0; t < rows; ++t) {
    float p[PER_LANE];
    float top = -1.0 / 0.0;
    for (uint i = 0; i < PER_LANE; ++i) {
      const uint e = lane + i * LANES;
      p[i] = e < E ? logits[t * LOGITS_STRIDE + e] : -1.0 / 0.0;
      top = max(top, p[i]);
    }
#if SIGMOID
    for (uint i = 0; i < PER_LANE; ++i) p[i] = lane + i * LANES < E ? 1.0 / (1.0 + exp(-p[i])) : 0.0;
    const float sum = 1.0;
#else
    top = subgroupMax(top);
    float sum = 0.0;
    for (uint i = 0; i < PER_LANE; ++i) {
      p[i] = lane + i * LANES < E ? exp(p[i] - top) : 0.0;
      sum += p[i];
    }
    sum = subgroupAdd(sum);
#endif
#if CORRECTION_BIAS || GROUPED
    // The values the experts are chosen by: score (+ bias).
    float c[PER_LANE];
    for (uint i = 0; i < PER_LANE; ++i) {
      const uint e = lane + i * LANES;
#if CORRECTION_BIAS
      c[i] = e < E ? p[i] / sum + bias[e] : NEG_INF;
#else
      c[i] = e < E ? p[i] / sum : NEG_INF;
#endif
    }
#endif
#if GROUPED
    // Each group's score, the same on every lane; then the TOPK_GROUPS best.
    float group_score[GROUPS];
    for (uint g = 0; g < GROUPS; ++g) {
      float mine = NEG_INF;
      uint at = NONE;
      for (uint i = 0; i < PER_LANE; ++i) {
        const uint e = lane + i * LANES;
        if (e < E && e / GROUP == g && c[i] > mine) {
          mine = c[i];
          at = e;
        }
      }
      const float first = subgroupMax(mine);
#if GROUP_TOP2
      // The second best: the best but for the first (lowest expert among equals).
      const uint first_at = subgroupMin(mine == first ? at : NONE);
      float second = NEG_INF;
      for (uint i = 0; i < PER_LANE; ++i) {
        const uint e = lane + i * LANES;
        if (e < E && e / GROUP == g && e != first_at) second = max(second, c[i]);
      }
      group_score[g] = first + subgroupMax(second);
#else
      group_score[g] = first;
#endif
    }
    uint kept = 0u;  // bit g: group g's experts may be chosen
    for (uint j = 0; j < TOPK_GROUPS; ++j) {
      float best = NEG_INF;
      uint pick = NONE;
      for (uint g = 0; g < GROUPS; ++g) {  // strictly greater: the lowest of equals
        if ((kept & (1u << g)) == 0u && (pick == NONE || group_score[g] > best)) {
          best = group_score[g];
          pick = g;
        }
      }
      kept |= 1u << pick;
    }
#endif
    uint taken = 0u;  // bit i: expert lane + i·LANES is chosen
    float chosen[TOPK];
    uint ids[TOPK];
    float total = 0.0;
    for (uint j = 0; j < TOPK; ++j) {
#if CORRECTION_BIAS || GROUPED
      float best = NEG_INF;
#else
      float best = -1.0;
#endif
      uint id = NONE;
      for (uint i = 0; i < PER_LANE; ++i) {  // ascending experts: strictly greater keeps the lowest of equals
        const uint e = lane + i * LANES;
#if CORRECTION_BIAS || GROUPED
        const float q = c[i];
#else
        const float q = p[i] / sum;
#endif
#if GROUPED
        if (e < E && (kept & (1u << (e / GROUP))) != 0u && (taken & (1u << i)) == 0u && q > best) {
#else
        if (e < E && (taken & (1u << i)) == 0u && q > best) {
#endif
          best = q;
          id = e;
        }
      }
      const float most = subgroupMax(best);
      const uint pick = subgroupMin(best == most ? id : NONE);
      if (pick % LANES == lane) taken |= 1u << (pick / LANES);
      ids[j] = pick;
#if CORRECTION_BIAS
      // The weight is the pick's score, without its bias: from its lane.
      const float weight = subgroupAdd(pick % LANES == lane ? p[pick / LANES] / sum : 0.0);
      chosen[j] = weight;
      total += weight;
#else
      chosen[j] = most;
      total += most;
#endif
    }
    if (lane == 0) {
      for (uint j = 0; j < TOPK; ++j) {
#if SCALED
        const float w = (NORM_TOPK != 0 ? chosen[j] / total : chosen[j]) * ROUTED_SCALE;
#else
        const float w = NORM_TOPK != 0 ? chosen[j] / total : chosen[j];
#endif
        route[weights + t * TOPK + j] = floatBitsToUint(w);
        const uint e = ids[j];
        const uint n = route[e];
        route[lists + e * rows + n] = t * TOPK + j;
        route[e] = n + 1u;
      }
    }
    subgroupMemoryBarrierBuffer();
    subgroupBarrier();
  }
  // The experts that have tokens, ascending: the expert matmuls run a
  // workgroup column per entry (a decode step: TOPK of them, not E).
  if (lane == 0) {
    uint used = 0u;
    for (uint e = 0; e < E; ++e)
      if (route[e] > 0u) route[E + 1u + used++] = e;
    route[E] = used;
  }
}
