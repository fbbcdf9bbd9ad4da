// Rows of C-contiguous arrays gathered by one index, out[i, :] = src[idx[i], :], for up to two arrays per
// launch (a dataset's inputs and targets): array a in pieces of UNIT_A bytes, array b in pieces of UNIT_B
// bytes (the widest that each row's bytes and base addresses allow). Indices are assumed valid; an absent
// second array has total_b = 0. copy_pair: two contiguous arrays copied in one launch (a captured step's
// batch into its graph's inputs), in the same pieces. copy_rows: a block of rows of pieces from rows src_pitch
// pieces apart into rows dst_pitch apart (a join of dense arrays along one axis, and its split: see join.py), in
// pieces of UNIT_A bytes, with 32-bit indices where the block allows (a 64-bit division costs several times more).
// index_fix: an index array (INDEX_BYTES wide, INDEX_SIGNED or not) made int64 and safe to gather with (see
// gather.py's checked_index).
// nvrtc-check: -DUNIT_A=16 -DUNIT_B=8
// nvrtc-check: -DUNIT_A=1 -DUNIT_B=2
// nvrtc-check: -DUNIT_A=4 -DUNIT_B=4
// nvrtc-check: -DUNIT_A=8 -DUNIT_B=16 -DINDEX_BYTES=8 -DINDEX_SIGNED=0
// nvrtc-check: -DUNIT_A=2 -DUNIT_B=1 -DINDEX_BYTES=4 -DINDEX_SIGNED=1
// nvrtc-check: -DUNIT_A=1 -DUNIT_B=1 -DINDEX_BYTES=1 -DINDEX_SIGNED=0
#ifndef UNIT_A
#define UNIT_A 16
#endif
#ifndef UNIT_B
#define UNIT_B 8
#endif

template <int B> struct Piece;
template <> struct Piece<16> { typedef uint4 T; };
template <> struct Piece<8> { typedef unsigned long long T; };
template <> struct Piece<4> { typedef unsigned int T; };
template <> struct Piece<2> { typedef unsigned short T; };
template <> struct Piece<1> { typedef unsigned char T; };

// piece i of the gathered rows (units pieces per row)
template <int B>
__device__ __forceinline__ void gather_piece(const void* src, void* out, const long long* idx, long long units,
                                             long long i) {
    typedef typename Piece<B>::T U;
    const long long row = i / units;
    static_cast<U*>(out)[i] = static_cast<const U*>(src)[idx[row] * units + (i - row * units)];
}

extern "C" __global__ void gather_rows(const long long* __restrict__ idx, const void* __restrict__ src_a,
                                       void* __restrict__ out_a, long long units_a, long long total_a,
                                       const void* __restrict__ src_b, void* __restrict__ out_b, long long units_b,
                                       long long total_b) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total_a + total_b;
         i += (long long)gridDim.x * blockDim.x) {
        if (i < total_a) gather_piece<UNIT_A>(src_a, out_a, idx, units_a, i);
        else gather_piece<UNIT_B>(src_b, out_b, idx, units_b, i - total_a);
    }
}

extern "C" __global__ void copy_pair(const void* __restrict__ src_a, void* __restrict__ out_a, long long total_a,
                                     const void* __restrict__ src_b, void* __restrict__ out_b, long long total_b) {
    typedef typename Piece<UNIT_A>::T A;
    typedef typename Piece<UNIT_B>::T B;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total_a + total_b;
         i += (long long)gridDim.x * blockDim.x) {
        if (i < total_a) static_cast<A*>(out_a)[i] = static_cast<const A*>(src_a)[i];
        else static_cast<B*>(out_b)[i - total_a] = static_cast<const B*>(src_b)[i - total_a];
    }
}

template <typename U, typename I>
__device__ __forceinline__ void copy_row_pieces(const U* __restrict__ src, U* __restrict__ dst, I n, I width,
                                                I src_pitch, I dst_pitch) {
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const I r = i / width, j = i - r * width;
        dst[r * dst_pitch + j] = src[r * src_pitch + j];
    }
}

extern "C" __global__ void copy_rows(const void* __restrict__ src, void* __restrict__ dst, long long rows,
                                     long long width, long long src_pitch, long long dst_pitch) {
    typedef typename Piece<UNIT_A>::T U;
    const U* s = static_cast<const U*>(src);
    U* d = static_cast<U*>(dst);
    const long long n = rows * width;
    if (n < (1LL << 31) && rows * src_pitch < (1LL << 31) && rows * dst_pitch < (1LL << 31)) {
        copy_row_pieces<U, unsigned>(s, d, (unsigned)n, (unsigned)width, (unsigned)src_pitch, (unsigned)dst_pitch);
    } else {
        copy_row_pieces<U, long long>(s, d, n, width, src_pitch, dst_pitch);
    }
}

// the index's integer type: INDEX_BYTES wide, signed or not
#ifndef INDEX_BYTES
#define INDEX_BYTES 8
#endif
#ifndef INDEX_SIGNED
#define INDEX_SIGNED 1
#endif
template <int B, bool Signed> struct Int;
template <> struct Int<1, true> { typedef signed char T; };
template <> struct Int<2, true> { typedef short T; };
template <> struct Int<4, true> { typedef int T; };
template <> struct Int<8, true> { typedef long long T; };
template <> struct Int<1, false> { typedef unsigned char T; };
template <> struct Int<2, false> { typedef unsigned short T; };
template <> struct Int<4, false> { typedef unsigned int T; };
template <> struct Int<8, false> { typedef unsigned long long T; };
typedef typename Int<INDEX_BYTES, INDEX_SIGNED>::T INDEX_T;

// out[i] = idx[i], plus n where negative, clipped into [0, n) (0 where n is 0), so that a gather by out stays in
// bounds; *first (all ones before the launch) ends as the smallest i whose idx[i] lies outside [lo, n) (atomicMin:
// the same in any order of the threads), for a check the host makes later without a sync now.
extern "C" __global__ void index_fix(const INDEX_T* __restrict__ idx, long long* __restrict__ out, long long count,
                                     long long lo, long long n, unsigned long long* __restrict__ first) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        // (an unsigned entry past the int64 range reads as n: out of range, as it is)
        const long long v = !INDEX_SIGNED && (unsigned long long)idx[i] > 0x7fffffffffffffffULL ? n : (long long)idx[i];
        if (v < lo || v >= n) atomicMin(first, (unsigned long long)i);
        const long long f = v < 0 ? v + n : v;
        out[i] = f < 0 ? 0 : f < n ? f : (n > 0 ? n - 1 : 0);
    }
}
