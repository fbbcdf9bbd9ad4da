// What the TMA convolution kernels share (conv_tma.cu, conv_tma_narrow.cu; sm_90a): tensor maps passed by
// value, mbarriers, the tensor memory accelerator's loads (tiled and im2col) and stores, the 128-byte swizzle
// of their boxes, and the epilogue's bias and ReLU.
#pragma once
#include "dtypes.cuh"  // to_f / from_f

// the element type of the kernels' operands: fp16 (CT_T __half) or bf16 (CT_T __nv_bfloat16, CT_IS_BF16 1)
#ifndef CT_T
#define CT_T __half
#endif
#ifndef CT_IS_BF16
#define CT_IS_BF16 0
#endif

// the host's CUtensorMap (cuTensorMapEncodeTiled or cuTensorMapEncodeIm2col), passed by value
struct __align__(64) TmaDesc { unsigned long long w[16]; };

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
// 64 channels at each of the map's pixels per column, from the pixel (w, h, n) of the window on, each read at
// (off_w, off_h) past it
__device__ __forceinline__ void tma_load_im2col(unsigned dst, const TmaDesc* map, unsigned bar, int c, int w, int h,
                                                int n, int off_w, int off_h) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(n),
                 "h"((unsigned short)off_w), "h"((unsigned short)off_h) : "memory");
}
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaDesc* map, unsigned bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TmaDesc* map, unsigned bar, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
// a box of shared memory out to the map's coordinates (elements outside the tensor are not written); the
// stores of one thread form bulk groups, waited for by wait_group
__device__ __forceinline__ void tma_store_2d(const TmaDesc* map, unsigned src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_store_3d(const TmaDesc* map, unsigned src, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void tma_store_5d(const TmaDesc* map, unsigned src, int c0, int c1, int c2, int c3,
                                             int c4) {
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];\n"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(c4) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// until the unit has read the shared memory of every committed store (it may be written again)
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// until every committed store has been written
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// makes this thread's shared-memory writes visible to the TMA unit (the async proxy)
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Four 8 x 8 matrices of 16-bit elements out of the MMAs' accumulator layout into shared memory (stmatrix): the
// thread holds, packed in r[i], row lane / 4 and columns 2 * (lane % 4), + 1 of matrix i; lane l gives the address
// of matrix l / 8's row l % 8 (16 bytes), or with TRANS of its column l % 8 (the matrix stored transposed).
template <bool TRANS>
__device__ __forceinline__ void stmatrix_x4(unsigned addr, const unsigned (&r)[4]) {
    if (TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                     ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
    else
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                     ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
// two such matrices (lanes 0-15 give the addresses)
template <bool TRANS>
__device__ __forceinline__ void stmatrix_x2(unsigned addr, unsigned r0, unsigned r1) {
    if (TRANS)
        asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
                     : "memory");
    else
        asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
                     : "memory");
}
// two floats as two 16-bit T in one word (the first in the low half: the lower address)
template <typename T> __device__ __forceinline__ unsigned pack2(float a, float b) {
    union { unsigned u; T e[2]; } p;
    p.e[0] = from_f<T>(a);
    p.e[1] = from_f<T>(b);
    return p.u;
}

// the byte offset of byte `o` of a box of 128-byte rows in the 128-byte swizzle (the box 1024-byte aligned):
// its 16-byte chunk within the row XOR the row's index mod 8
__device__ __forceinline__ unsigned swizzle128(unsigned o) { return o ^ (((o >> 7) & 7u) << 4); }

// One residue class of output pixels (a stride-2 backward-data's; the one class of any other sum): its live
// taps (R x S of them, the first at (r0, s0) of the full filter, tap_step apart), their gather offsets (oy, ox)
// and the class's first output pixel (y0, x0); PER_CLASS entries of the host's constants.
constexpr int PER_CLASS = 8;
struct Class {
    int R, S, oy, ox, r0, s0, y0, x0;
    __device__ Class(const int* p) : R(p[0]), S(p[1]), oy(p[2]), ox(p[3]), r0(p[4]), s0(p[5]), y0(p[6]), x0(p[7]) {}
};

// CT_SCHEDULE 1: a block walks its units as the host's schedule lists them (conv_tma.py's `schedule`: units of
// unequal work, the stride-2 classes' taps, balanced across the persistent blocks); 0: round-robin (blockIdx.x,
// + gridDim.x, ...), where the units are equal (through a Schedule the kernels measured 3-6% slower there). The
// schedule: each block's first place in the list (gridDim.x + 1 entries), then the list.
#ifndef CT_SCHEDULE
#define CT_SCHEDULE 0
#endif
struct Schedule {
    const int* list;
    int begin, end;
    __device__ Schedule(const int* sched)
        : list(sched + gridDim.x + 1), begin(sched[blockIdx.x]), end(sched[blockIdx.x + 1]) {}
};

// the epilogue of one accumulator of output channel n (of N): its bias (flags & 2) and ReLU (flags & 1), in fp32
template <typename T>
__device__ __forceinline__ float bias_relu(float v, int n, int N, const T* __restrict__ bias, int flags) {
    if (flags & 2) v += n < N ? to_f(bias[n]) : 0.0f;
    return (flags & 1) && v <= 0.0f ? 0.0f : v;  // ReLU: NaN stays NaN, as in PyTorch
}
