// Merges the SPLITS partial softmaxes attention.comp wrote for each (row,
// head): M = max m_s, L = Σ l_s·e^(m_s − M), o = Σ acc_s·e^(m_s − M) / L.
// One subgroup-sized workgroup per (head, row). Its lanes take the splits
// in turn for M and L (a subgroup's max and sum) and keep each split's
// weight e^(m_s − M) in shared memory; then they walk the head's dims, each
// lane's sum over the splits a run of independent loads. (A lane walking
// every split alone, each step waiting on its load, took 58 µs a decode
// step at 64 splits on an H200, where attention itself took 33.)
//
// Generated constants: HQ, DH.
// Specialization constants: 0 the workgroup size, 1 SPLITS (as attention.comp's).
// Push constants (RowsPush): rows.
// Buffers: part [rows][HQ][SPLITS][DH + 2] f32; o [rows][HQ·DH] f32.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint SPLITS = 1;

layout(std430, binding = BINDING_partials) readonly buffer Part { float part[]; };
layout(std430, binding = BINDING_out) writeonly buffer O { float o[]; };

shared float weight[SPLITS];  // e^(m_s − M) of split s

void main() {
  const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lane = gl_LocalInvocationID.x;
  if (t >= pc.rows) return;
  const uint base = (t * HQ + head) * SPLITS * (DH + 2);
  float top = -1.0 / 0.0;
  for (uint s = lane; s < SPLITS; s += gl_WorkGroupSize.x) top = max(top, part[base + s * (DH + 2)]);
  top = subgroupMax(top);
  float total = 0.0;
  for (uint s = lane; s < SPLITS; s += gl_WorkGroupSize.x) {
    const uint at = base + s * (DH + 2);
    const float w = exp(part[at] - top);
    weight[s] = w;
    total += part[at + 1] * w;
  }
  total = subgroupAdd(total);
  barrier();
  for (uint d = lane; d < DH; d += gl_WorkGroupSize.x) {
    float sum = 0.0;
    for (uint s = 0; s < SPLITS; ++s) sum += part[base + s * (DH + 2) + 2 + d] * weight[s];
    o[t * (HQ * DH) + head * DH + d] = sum / total;
  }
}
