// The strided 1x1 convolution's moves of pixels (conv1x1.py), fp32, over the N * C planes of x (H x W) and of
// its P x Q strided pixels:
//   gather_pixels   xs[plane][p][q] = x[plane][p * sh][q * sw]
//   scatter_pixels  dx[plane][h][w] = dxs[plane][h / sh][w / sw] where sh | h and sw | w (and inside P x Q), else 0:
//                   dx written once, no memset before
// Four consecutive outputs of one row per thread (neighbouring threads write neighbouring 16-byte runs); 32-bit
// indices (the host takes CuPy's slicing past 2^31 elements).

// paired (the host checks: sw == 2, W and Q multiples of 4, x 16-byte aligned): a thread's four outputs are the
// even elements of eight consecutive inputs, two 16-byte loads and one 16-byte store
extern "C" __global__ void gather_pixels(const float* __restrict__ x, float* __restrict__ xs, int planes, int H,
                                         int W, int P, int Q, int sh, int sw, int paired) {
    const int quads = (Q + 3) / 4, total = planes * P * quads;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int row = i / quads, q0 = (i - row * quads) * 4;  // row: plane * P + p
        const int plane = row / P, p = row - plane * P;
        const float* src = x + ((size_t)plane * H + (size_t)p * sh) * W + (size_t)q0 * sw;
        float* dst = xs + (size_t)row * Q + q0;
        if (paired) {
            const float4 a = reinterpret_cast<const float4*>(src)[0], b = reinterpret_cast<const float4*>(src)[1];
            *reinterpret_cast<float4*>(dst) = make_float4(a.x, a.z, b.x, b.z);
            continue;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (q0 + j < Q) dst[j] = src[j * sw];
    }
}

// quad_stores (the host checks: W a multiple of 4, dx 16-byte aligned): a thread's four outputs in one 16-byte store
extern "C" __global__ void scatter_pixels(const float* __restrict__ dxs, float* __restrict__ dx, int planes, int H,
                                          int W, int P, int Q, int sh, int sw, int quad_stores) {
    const int quads = (W + 3) / 4, total = planes * H * quads;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int row = i / quads, w0 = (i - row * quads) * 4;  // row: plane * H + h
        const int plane = row / H, h = row - plane * H, p = h / sh;
        const bool on_row = p * sh == h && p < P;
        const float* src = dxs + ((size_t)plane * P + p) * Q;
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int w = w0 + j, q = w / sw;
            v[j] = on_row && w < W && q * sw == w && q < Q ? src[q] : 0.0f;
        }
        float* dst = dx + (size_t)row * W + w0;
        if (quad_stores) {
            *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
            continue;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (w0 + j < W) dst[j] = v[j];
    }
}
