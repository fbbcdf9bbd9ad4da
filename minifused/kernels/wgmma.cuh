// Hopper's warpgroup MMA (sm_90a) for the convolution kernels: shared-memory matrix descriptors, the
// asynchronous group's fences, and one m64 x WG_N x 32-byte step on fp32 accumulators.
// The including file defines WG_N (the columns of one warpgroup's MMA: 64, 128, 168 or 192), WG_KIND (0 fp16,
// 1 bf16, 2 TF32 from float) and, for fp16 / bf16, WG_TRANS (1: both operands MN-major, else K-major) or
// WG_TRANS_A and WG_TRANS_B (each operand's).
#pragma once

#ifndef WG_TRANS
#define WG_TRANS 0
#endif
#ifndef WG_TRANS_A
#define WG_TRANS_A WG_TRANS
#endif
#ifndef WG_TRANS_B
#define WG_TRANS_B WG_TRANS
#endif

// A shared-memory matrix descriptor of a K-major tile of 128-byte rows, 128-byte swizzled: start address,
// leading-dimension byte offset (unused by swizzled K-major tiles; 1 by convention), stride byte offset 1024
// (8 rows of 128 bytes to the next 8), 128-byte swizzle (mode 1 in bits 62-63); addresses in 16-byte units.
__device__ __forceinline__ unsigned long long wg_desc(const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    return (unsigned long long)((a & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// keeps the compiler from moving accumulator accesses across the asynchronous MMAs
template <int N> __device__ __forceinline__ void wg_fence_acc(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define WG_STR2(x) #x
#define WG_STR(x) WG_STR2(x)
#if WG_KIND == 2
#define WG_OP "wgmma.mma_async.sync.aligned.m64n" WG_STR(WG_N) "k8.f32.tf32.tf32 "
#define WG_TAIL ", p, 1, 1;\n}\n"
#else
#define WG_OP "wgmma.mma_async.sync.aligned.m64n" WG_STR(WG_N) "k16.f32." WG_AB "." WG_AB " "
#define WG_TAIL ", p, 1, 1, " WG_STR(WG_TRANS_A) ", " WG_STR(WG_TRANS_B) ";\n}\n"
#if WG_KIND == 1
#define WG_AB "bf16"
#else
#define WG_AB "f16"
#endif
#endif
#define WG_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define WG_D8(i) WG_D4(i), WG_D4(i + 4)
// d (64 x WG_N, fp32, in the mma.sync C layout per warp's 16 rows) += A (64 rows) * B (WG_N rows)^T over the
// 32 bytes of reduction at descriptors a, b (k16 of fp16/bf16, k8 of TF32)
__device__ __forceinline__ void wgmma_step(float (&d)[WG_N / 2], unsigned long long a, unsigned long long b) {
#if WG_N == 128
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 WG_OP "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65" WG_TAIL
                 : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
                 : "l"(a), "l"(b), "r"(1));
#elif WG_N == 64
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 WG_OP "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33" WG_TAIL
                 : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
                 : "l"(a), "l"(b), "r"(1));
#elif WG_N == 192
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 WG_OP "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
                 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
                 "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, %96, %97" WG_TAIL
                 : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56),
                   WG_D8(64), WG_D8(72), WG_D8(80), WG_D8(88)
                 : "l"(a), "l"(b), "r"(1));
#elif WG_N == 168  // (conv_tma_narrow.cu on 28-wide maps: 6 rows of 28 pixels)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %86, 0;\n"
                 WG_OP "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
                 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
                 "%80,%81,%82,%83}, %84, %85" WG_TAIL
                 : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32),
                   WG_D8(40), WG_D8(48), WG_D8(56), WG_D8(64), WG_D8(72), WG_D4(80)
                 : "l"(a), "l"(b), "r"(1));
#else
#error "WG_N is 64, 128, 168 or 192"
#endif
}
