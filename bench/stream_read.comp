// The device's read bandwidth the two ways a kernel may read weights: 16
// bytes an invocation a step from a storage buffer (uvec4 loads), or, built
// with -DTEXEL, from a uniform texel buffer of RGBA32UI texels (texelFetch,
// how lathe's matmul kernels read them). Each invocation folds what it
// read into one value and writes it only if it equals a pattern no data
// here holds, so the loads stay and nothing is written: the bytes are the
// reads alone. Grid-stride loop, as stream_copy.comp. Compiled at build
// time (bench/CMakeLists.txt), both ways.
#version 450
layout(local_size_x_id = 0) in;
#ifdef TEXEL
layout(binding = 0) uniform usamplerBuffer a;
#define LOAD(i) texelFetch(a, int(i))
#else
layout(std430, binding = 0) readonly buffer A { uvec4 a[]; };
#define LOAD(i) a[i]
#endif
layout(std430, binding = 1) writeonly buffer B { uvec4 b[]; };
layout(push_constant) uniform Push { uint n; } p;  // uvec4 elements

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uvec4 folded = uvec4(0u);
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) folded ^= LOAD(i);
  if (folded == uvec4(0x9e3779b9u, 0x7f4a7c15u, 0xf39cc060u, 0x5ced1ad3u)) b[0] = folded;
}
