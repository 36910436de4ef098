// Push-constant layouts of the kernels: one description per layout (an
// X-macro list of uint32 fields), from which this header defines the C++
// struct the runtime fills and the generator emits the GLSL block
// (generator/emit/push_layout.cpp), so the two cannot drift apart. A test
// reads the offsets back from the compiled SPIR-V.
//
// Values that change between decode steps of one recorded command buffer (the
// cache position, the token) are not here: kernels read them from the
// session's host-visible IO buffer, so a recorded step can be submitted again.
#pragma once

#include <cstdint>
#include <iterator>
#include <string_view>

namespace lathe::push {

// Kernels over a chunk of token rows (embed, norm, argmax).
#define LATHE_PUSH_ROWS(X) X(rows, "token rows in this chunk")

// matmul.comp: y[t][r] = epilogue(W[r + *_row0] · x[t + x_row0]).
#define LATHE_PUSH_MATMUL(X)                                                \
  X(rows, "token rows in this chunk")                                       \
  X(n, "output width: the weight rows used")                                \
  X(x_row0, "first input row (the LM head of the last token reads T - 1)") \
  X(gate_row0, "first weight row of W (a fused gate_up tensor's half)")     \
  X(up_row0, "first weight row of W2 (gated MLPs)")

// rope_kv.comp and attention.comp: q, k, v live in one buffer each or in one
// fused qkv buffer; element (t, i) of q is at q_offset + t * q_stride + i.
#define LATHE_PUSH_ATTENTION(X)                \
  X(rows, "token rows in this chunk")          \
  X(q_offset, "q column offset in its buffer") \
  X(q_stride, "q row stride")                  \
  X(k_offset, "k column offset")               \
  X(k_stride, "k row stride")                  \
  X(v_offset, "v column offset")               \
  X(v_stride, "v row stride")

struct FieldInfo {
  std::string_view name;
  std::string_view comment;
};

#define LATHE_PUSH_MEMBER(name, comment) uint32_t name;
#define LATHE_PUSH_INFO(name, comment) FieldInfo{#name, comment},

struct RowsPush {
  LATHE_PUSH_ROWS(LATHE_PUSH_MEMBER)
};
struct MatmulPush {
  LATHE_PUSH_MATMUL(LATHE_PUSH_MEMBER)
};
struct AttentionPush {
  LATHE_PUSH_ATTENTION(LATHE_PUSH_MEMBER)
};

inline constexpr FieldInfo kRowsPush[] = {LATHE_PUSH_ROWS(LATHE_PUSH_INFO)};
inline constexpr FieldInfo kMatmulPush[] = {LATHE_PUSH_MATMUL(LATHE_PUSH_INFO)};
inline constexpr FieldInfo kAttentionPush[] = {LATHE_PUSH_ATTENTION(LATHE_PUSH_INFO)};

#undef LATHE_PUSH_MEMBER
#undef LATHE_PUSH_INFO

static_assert(sizeof(RowsPush) == 4 * std::size(kRowsPush));
static_assert(sizeof(MatmulPush) == 4 * std::size(kMatmulPush));
static_assert(sizeof(AttentionPush) == 4 * std::size(kAttentionPush));

}  // namespace lathe::push
