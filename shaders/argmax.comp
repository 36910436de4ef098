// Greedy sampling on the device: the index of the largest logit of the
// chunk's last row (the lowest index among equals), written to io.rows[0].token
// where the next decode step's embedding reads it. One subgroup.
//
// Generated constants: V (vocabulary).
// Push constants (RowsPush): rows (of the logits buffer: the last one is read).
// Buffers: io; logits [rows][V] f32.

#include "common.glsl"

layout(local_size_x_id = 0) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_logits) readonly buffer L { float logits[]; };

void main() {
  const uint base = (pc.rows - 1) * V;
  float best = -1.0 / 0.0;
  uint index = 0xffffffffu;
  for (uint i = gl_LocalInvocationID.x; i < V; i += gl_WorkGroupSize.x) {
    const float value = logits[base + i];
    if (value > best || index == 0xffffffffu) {  // strictly greater: the first of equals stays
      best = value;
      index = i;
    }
  }
  const float top = subgroupMax(best);
  const uint first = subgroupMin(best == top ? index : 0xffffffffu);
  if (gl_LocalInvocationID.x == 0) io.rows[0].token = first;
}
