// Dropout forward and backward (see dropout.py for the hash that draws the mask). Plain launches
// rather than CuPy ElementwiseKernels: those cost several times the host time per call, which is
// what a small-batch training step is made of.
//
// nvrtc-check: -DDROP_T=float -DDROP_S=float
// nvrtc-check: -DDROP_T=__half -DDROP_S=float
// nvrtc-check: -DDROP_T=__nv_bfloat16 -DDROP_S=float
// nvrtc-check: -DDROP_T=double -DDROP_S=double
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef DROP_T
#define DROP_T float
#endif
#ifndef DROP_S
#define DROP_S float
#endif
typedef DROP_T T;
typedef DROP_S S;

#include "dtypes.cuh"  // to_acc / from_acc

#define GRID_LOOP(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// ctr: null in eager calls; inside a captured step, the device counter that each replay advances,
// mixed into the seed so every replay draws a new mask.
// mask: bit-packed, one uint32 word per 32 elements (layout in elementwise.cu): the loop runs over n
// rounded up to 32 so that every warp covers one whole word, built by one __ballot_sync.
// y may be x (in place): each element is read and then written by one thread, so no __restrict__.
extern "C" __global__ void dropout_fwd(const T* x, T* y, unsigned* __restrict__ mask,
                                       long long n, unsigned long long seed0, const unsigned long long* ctr,
                                       unsigned long long thresh, S scale) {
    const unsigned long long seed = ctr ? seed0 + ctr[0] * 0xD1B54A32D192ED03ULL : seed0;
    const long long n32 = (n + 31) & ~31LL;
    GRID_LOOP(i, n32) {
        unsigned long long z = seed + (unsigned long long)(i + 1) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z = z ^ (z >> 31);
        const bool keep = i < n && (z >> 40) >= thresh;
        if (i < n) y[i] = keep ? from_acc<T>(to_acc<S>(x[i]) * scale) : from_acc<T>((S)0);
        const unsigned word = __ballot_sync(0xffffffffu, keep);
        if ((threadIdx.x & 31) == 0) mask[i >> 5] = word;
    }
}

// The backward (grad * scale where the mask bit is set) is mask_apply in elementwise.cu.
