// Merges the SPLITS partial softmaxes attention.comp wrote for each (row,
// head): M = max m_s, L = Σ l_s·e^(m_s − M), o = Σ acc_s·e^(m_s − M) / L.
// One subgroup-sized workgroup per (head, row); lanes walk the head's dims.
//
// Generated constants: HQ, DH.
// Specialization constants: 0 the workgroup size, 1 SPLITS (as attention.comp's).
// Push constants (RowsPush): rows.
// Buffers: part [rows][HQ][SPLITS][DH + 2] f32; o [rows][HQ·DH] f32.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint SPLITS = 1;

layout(std430, binding = BINDING_partials) readonly buffer Part { float part[]; };
layout(std430, binding = BINDING_out) writeonly buffer O { float o[]; };

void main() {
  const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
  if (t >= pc.rows) return;
  const uint base = (t * HQ + head) * SPLITS * (DH + 2);
  float top = -1.0 / 0.0;
  for (uint s = 0; s < SPLITS; ++s) top = max(top, part[base + s * (DH + 2)]);
  float total = 0.0;
  for (uint s = 0; s < SPLITS; ++s) {
    const uint at = base + s * (DH + 2);
    total += part[at + 1] * exp(part[at] - top);
  }
  for (uint d = gl_LocalInvocationID.x; d < DH; d += gl_WorkGroupSize.x) {
    float sum = 0.0;
    for (uint s = 0; s < SPLITS; ++s) {
      const uint at = base + s * (DH + 2);
      sum += part[at + 2 + d] * exp(part[at] - top);
    }
    o[t * (HQ * DH) + head * DH + d] = sum / total;
  }
}
