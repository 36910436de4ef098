// The bench's device bandwidth: b = a, 16 bytes an invocation a step, read
// and written by the multiprocessors (as the model's kernels read weights),
// not by a copy engine. Grid-stride loop: a few waves of workgroups cover
// any size. Compiled at build time (bench/CMakeLists.txt).
#version 450
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer A { uvec4 a[]; };
layout(std430, binding = 1) writeonly buffer B { uvec4 b[]; };
layout(push_constant) uniform Push { uint n; } p;  // uvec4 elements

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) b[i] = a[i];
}
