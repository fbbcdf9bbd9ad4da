// Rows of a C-contiguous array gathered by index: out[i, :] = src[idx[i], :], moved in pieces of UNIT_BYTES
// (the widest that the row's bytes and both base addresses allow). Indices are assumed valid.
// nvrtc-check: -DUNIT_BYTES=16
// nvrtc-check: -DUNIT_BYTES=8
// nvrtc-check: -DUNIT_BYTES=1
#ifndef UNIT_BYTES
#define UNIT_BYTES 16
#endif
#if UNIT_BYTES == 16
typedef uint4 UNIT;
#elif UNIT_BYTES == 8
typedef unsigned long long UNIT;
#elif UNIT_BYTES == 4
typedef unsigned int UNIT;
#elif UNIT_BYTES == 2
typedef unsigned short UNIT;
#else
typedef unsigned char UNIT;
#endif

extern "C" __global__ void gather_rows(const UNIT* __restrict__ src, const long long* __restrict__ idx,
                                       UNIT* __restrict__ out, long long units_per_row, long long total) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long row = i / units_per_row;
        out[i] = src[idx[row] * units_per_row + (i - row * units_per_row)];
    }
}
