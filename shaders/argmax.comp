// Greedy sampling on the device: the index of the largest logit of the
// chunk's last row (the lowest index among equals), written to io.rows[0].token
// where the next decode step's embedding reads it.
//
// One workgroup of 128 invocations (every device's least
// maxComputeWorkGroupInvocations), four loads in flight a lane: a 128k
// vocabulary is 250 steps a lane, where one subgroup alone took 4,000 (0.4 ms
// of an 8B model's 7.6 ms decode step on an H200, bench/README.md). It
// takes about 0.1 ms there, and as long with 16 loads in flight (measured,
// 2026-11-27): one workgroup runs on one multiprocessor, whose bandwidth
// bounds it; a pass over many workgroups and a second to combine them would
// not be.
//
// Generated constants: V (vocabulary).
// Push constants (RowsPush): rows (of the logits buffer: the last one is read).
// Buffers: io; logits [rows][V] f32.

#include "common.glsl"

#define WG 128u
#define UNROLL 4u
layout(local_size_x = WG) in;

IO_BLOCK(BINDING_io)
layout(std430, binding = BINDING_logits) readonly buffer L { float logits[]; };

// Each subgroup's largest value and its first index (at most WG subgroups).
shared float best_of[WG];
shared uint index_of[WG];

void main() {
  const uint base = (pc.rows - 1) * V, lane = gl_LocalInvocationID.x;
  float best = -1.0 / 0.0;
  uint index = 0xffffffffu;
  // A lane reads indices lane, lane + WG, …: increasing, so strictly greater
  // keeps the first of equals.
  for (uint i0 = lane; i0 < V; i0 += UNROLL * WG) {
    float v[UNROLL];
    for (uint u = 0; u < UNROLL; ++u) v[u] = i0 + u * WG < V ? logits[base + i0 + u * WG] : 0.0;
    for (uint u = 0; u < UNROLL; ++u) {
      if (i0 + u * WG < V && (v[u] > best || index == 0xffffffffu)) {
        best = v[u];
        index = i0 + u * WG;
      }
    }
  }
  const float top = subgroupMax(best);
  const uint first = subgroupMin(best == top ? index : 0xffffffffu);
  if (subgroupElect()) {
    best_of[gl_SubgroupID] = top;
    index_of[gl_SubgroupID] = first;
  }
  barrier();
  if (lane == 0) {
    float b = best_of[0];
    uint f = index_of[0];
    for (uint s = 1; s < gl_NumSubgroups; ++s) {
      if (best_of[s] > b || (best_of[s] == b && index_of[s] < f)) {
        b = best_of[s];
        f = index_of[s];
      }
    }
    io.rows[0].token = f;
  }
}
