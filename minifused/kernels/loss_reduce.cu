// The 'sum' / 'mean' reduction of a loss's per-row values in one launch: one block adds the
// rows (and, for 'mean', the rows' weights) in a fixed order (strided per thread, then a
// shared-memory tree), and writes the loss in the output dtype and the 'mean' denominator
// (float32) that backward divides by. One launch instead of the five or so array operations
// (two sums, a division, casts), each with its own host time.
//
// nvrtc-check: -DOUT_T=float
// nvrtc-check: -DOUT_T=__half
// nvrtc-check: -DOUT_T=__nv_bfloat16
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef OUT_T
#define OUT_T float
#endif

#include "dtypes.cuh"  // from_f

#define THREADS 1024

// mean != 0: out = sum(loss) / sum(weight), denom = sum(weight); else out = sum(loss).
// All weights zero (every target ignored) gives 0/0 = NaN, as PyTorch does.
extern "C" __global__ void __launch_bounds__(THREADS) loss_reduce(const float* __restrict__ loss,
                                                                  const float* __restrict__ weight,
                                                                  OUT_T* __restrict__ out, float* __restrict__ denom,
                                                                  long long rows, int mean) {
    __shared__ float sl[THREADS], sw[THREADS];
    float l = 0.0f, w = 0.0f;
    for (long long i = threadIdx.x; i < rows; i += THREADS) {
        l += loss[i];
        if (mean) w += weight[i];
    }
    sl[threadIdx.x] = l;
    sw[threadIdx.x] = w;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            sl[threadIdx.x] += sl[threadIdx.x + half];
            sw[threadIdx.x] += sw[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (mean) {
            denom[0] = sw[0];
            out[0] = from_f<OUT_T>(sl[0] / sw[0]);
        } else {
            out[0] = from_f<OUT_T>(sl[0]);
        }
    }
}
