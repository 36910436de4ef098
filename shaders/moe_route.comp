// Mixture-of-experts routing of a chunk: for each token row, the softmax
// over its E router logits (f32), the TOPK largest (equal ones by lowest
// expert index, as torch.topk), their weights (renormalized to sum 1 with
// NORM_TOPK); and for each expert, the slots t·TOPK + j routed to it, in
// token order, so that the expert matmuls read each expert's weights once
// per chunk for all of its tokens. One subgroup; tokens in turn.
//
// Generated constants: E (experts), TOPK, NORM_TOPK, LOGITS_STRIDE (E, or
// more when the logits share their matmul with other rows).
// Push constants (RowsPush): rows.
// Buffers: logits [rows][LOGITS_STRIDE] f32, the router's first; route (words): counts[E]; A, the number of
//          experts with tokens, and those experts ascending (E words);
//          weights[rows·TOPK] (f32 bits) at 2E + 1; per expert e its rows
//          slots at 2E + 1 + rows·TOPK + e·rows.

layout(local_size_x_id = 0) in;

layout(std430, binding = BINDING_logits) readonly buffer L { float logits[]; };
layout(std430, binding = BINDING_route) buffer R { uint route[]; };

const uint LANES = gl_WorkGroupSize.x;
const uint PER_LANE = (E + LANES - 1) / LANES;  // lane l holds experts l, l + LANES, …
const uint NONE = 0xffffffffu;

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
    top = subgroupMax(top);
    float sum = 0.0;
    for (uint i = 0; i < PER_LANE; ++i) {
      p[i] = lane + i * LANES < E ? exp(p[i] - top) : 0.0;
      sum += p[i];
    }
    sum = subgroupAdd(sum);
    uint taken = 0u;  // bit i: expert lane + i·LANES is chosen
    float chosen[TOPK];
    uint ids[TOPK];
    float total = 0.0;
    for (uint j = 0; j < TOPK; ++j) {
      float best = -1.0;
      uint id = NONE;
      for (uint i = 0; i < PER_LANE; ++i) {  // ascending experts: strictly greater keeps the lowest of equals
        const uint e = lane + i * LANES;
        const float q = p[i] / sum;
        if (e < E && (taken & (1u << i)) == 0u && q > best) {
          best = q;
          id = e;
        }
      }
      const float most = subgroupMax(best);
      const uint pick = subgroupMin(best == most ? id : NONE);
      if (pick % LANES == lane) taken |= 1u << (pick / LANES);
      ids[j] = pick;
      chosen[j] = most;
      total += most;
    }
    if (lane == 0) {
      for (uint j = 0; j < TOPK; ++j) {
        const float w = NORM_TOPK != 0 ? chosen[j] / total : chosen[j];
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
