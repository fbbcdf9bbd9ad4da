// The strided 1x1 convolution's moves of pixels (conv1x1.py), fp32, over the N * C planes of x (H x W) and of
// its P x Q strided pixels:
//   gather_pixels   xs[plane][p][q] = x[plane][p * sh][q * sw]; channel_major: xs[c][n][p][q] of plane n * C + c
//   images_to_channels  y[n][k][pq] = d[k][n][pq] + bias[k] (the one-GEMM forward's output, channel-major)
//   scatter_pixels  dx[plane][h][w] = dxs[plane][h / sh][w / sw] where sh | h and sw | w (and inside P x Q), else 0:
//                   dx written once, no memset before
// The gather and the scatter: four consecutive outputs of one row per thread (neighbouring threads write
// neighbouring 16-byte runs). 32-bit indices (the host takes CuPy's slicing past 2^31 elements).

// paired (the host checks: sw == 2, W and Q multiples of 4, x 16-byte aligned): a thread's four outputs are the
// even elements of eight consecutive inputs, two 16-byte loads and one 16-byte store
extern "C" __global__ void gather_pixels(const float* __restrict__ x, float* __restrict__ xs, int planes, int H,
                                         int W, int P, int Q, int sh, int sw, int paired, int C, int channel_major) {
    const int quads = (Q + 3) / 4, total = planes * P * quads, images = planes / C;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int row = i / quads, q0 = (i - row * quads) * 4;  // row: plane * P + p
        const int plane = row / P, p = row - plane * P, n = plane / C;
        const int out_plane = channel_major ? (plane - n * C) * images + n : plane;
        const float* src = x + ((size_t)plane * H + (size_t)p * sh) * W + (size_t)q0 * sw;
        float* dst = xs + ((size_t)out_plane * P + p) * Q + q0;
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

// quads (the host checks: PQ a multiple of 4): four consecutive outputs of one image's channel, 16-byte moves.
// Otherwise PQ is at most MOVE_PIXELS (the host's one-GEMM forward takes images of fewer pixels): a block moves
// MOVE_RUNS consecutive runs of PQ floats of d (run u = k * N + n: consecutive runs are contiguous there) through
// shared memory, loaded as one contiguous chunk (neighbouring threads, neighbouring floats; several loads in flight
// a thread), then each warp stores whole runs to y (neighbouring lanes, neighbouring floats); one element a thread
// with two divisions each moved at half the copy rate. (Over runs of 16 the quads' 16-byte moves are faster.)
constexpr int MOVE_RUNS = 32, MOVE_PIXELS = 64, MOVE_THREADS = 256, MOVE_LOADS = MOVE_RUNS * MOVE_PIXELS / MOVE_THREADS;
extern "C" __global__ void __launch_bounds__(MOVE_THREADS)
images_to_channels(const float* __restrict__ d, const float* __restrict__ bias, float* __restrict__ y, int N, int K,
                   int PQ, int quads) {
    if (quads) {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N * K * PQ / 4; i += gridDim.x * blockDim.x) {
            const int e = i * 4, row = e / PQ, pq = e - row * PQ, n = row / K, k = row - n * K;  // row: n * K + k
            const float4 v = *reinterpret_cast<const float4*>(d + ((size_t)k * N + n) * PQ + pq);
            const float add = bias ? bias[k] : 0.0f;
            *reinterpret_cast<float4*>(y + e) = make_float4(v.x + add, v.y + add, v.z + add, v.w + add);
        }
        return;
    }
    __shared__ float chunk[MOVE_RUNS * MOVE_PIXELS];
    const int runs = N * K, lane = threadIdx.x % 32;
    for (int u0 = blockIdx.x * MOVE_RUNS; u0 < runs; u0 += gridDim.x * MOVE_RUNS) {
        const int count = min(MOVE_RUNS, runs - u0), size = count * PQ;
        const float* src = d + (size_t)u0 * PQ;
        float v[MOVE_LOADS];  // all of a thread's loads issued before its first store
#pragma unroll
        for (int j = 0; j < MOVE_LOADS; ++j) {
            const int e = threadIdx.x + j * MOVE_THREADS;
            v[j] = e < size ? src[e] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < MOVE_LOADS; ++j)
            if (threadIdx.x + j * MOVE_THREADS < size) chunk[threadIdx.x + j * MOVE_THREADS] = v[j];
        __syncthreads();
        for (int r = threadIdx.x / 32; r < count; r += MOVE_THREADS / 32) {
            const int u = u0 + r, k = u / N, n = u - k * N;
            const float add = bias ? bias[k] : 0.0f;
            float* dst = y + ((size_t)n * K + k) * PQ;
            for (int pq = lane; pq < PQ; pq += 32) dst[pq] = chunk[r * PQ + pq] + add;
        }
        __syncthreads();  // the chunk is refilled next trip
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

// strided_forward: the strided forward as one SGEMM that reads x's pixels where they lie (no gathered copy):
//   y[n][k][pq] = sum_c w[k][c] * x[n][c][p * sh][q * sw] (+ bias[k]),  pq = p * Q + q
// A tile is 128 output channels x 128 output pixels of the flattened m = n * PQ + pq (across images), reduced 8
// channels at a time through double-buffered shared memory (the next 8 channels held in registers while these
// multiply); 256 threads, each an 8 x 8 block of outputs: rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, columns
// tx*4 + {0..3} and 64 + tx*4 + {0..3} (16-byte shared-memory reads without bank conflicts). Where PQ is a
// multiple of 4, each run of 4 columns lies in one image and leaves as one 16-byte store.
constexpr int S1_TILE = 128, S1_DEPTH = 8, S1_THREADS = 256;

extern "C" __global__ void __launch_bounds__(S1_THREADS, 2)
strided_forward(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                float* __restrict__ y, int N, int C, int H, int W, int K, int P, int Q, int sh, int sw) {
    __shared__ __align__(16) float As[2][S1_DEPTH][S1_TILE];  // [channel][output channel]
    __shared__ __align__(16) float Bs[2][S1_DEPTH][S1_TILE];  // [channel][pixel]
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int PQ = P * Q;
    const long long M = (long long)N * PQ, m0 = (long long)blockIdx.x * S1_TILE;
    const int k0 = blockIdx.y * S1_TILE;
    const size_t plane = (size_t)H * W;

    // loads: w's 128 x 8 as two threads per output channel, four channels each; x's 8 x 128 as one pixel per
    // thread, channels tid / 128 + {0, 2, 4, 6}
    const int a_k = k0 + tid / 2, a_c = (tid % 2) * 4;
    const int b_col = tid % S1_TILE, b_c = tid / S1_TILE;
    const long long b_m = m0 + b_col;
    const bool b_ok = b_m < M;
    size_t b_base = 0;
    if (b_ok) {
        const long long n = b_m / PQ;
        const int pq = (int)(b_m - n * PQ), p = pq / Q, q = pq - p * Q;
        b_base = (size_t)n * C * plane + (size_t)p * sh * W + (size_t)q * sw;
    }
    float a_reg[4], b_reg[4];
    auto load = [&](int c0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int ca = c0 + a_c + j, cb = c0 + b_c + 2 * j;
            a_reg[j] = a_k < K && ca < C ? w[(size_t)a_k * C + ca] : 0.0f;
            b_reg[j] = b_ok && cb < C ? x[b_base + (size_t)cb * plane] : 0.0f;
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            As[buf][a_c + j][tid / 2] = a_reg[j];
            Bs[buf][b_c + 2 * j][b_col] = b_reg[j];
        }
    };

    float acc[8][8] = {};
    load(0);
    store(0);
    __syncthreads();
    int buf = 0;
    for (int c0 = 0; c0 < C; c0 += S1_DEPTH) {
        const bool more = c0 + S1_DEPTH < C;
        if (more) load(c0 + S1_DEPTH);  // in flight while this depth multiplies
#pragma unroll
        for (int d = 0; d < S1_DEPTH; ++d) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][d][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][d][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][d][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][d][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
            store(buf ^ 1);
            __syncthreads();
            buf ^= 1;
        }
    }

    // epilogue: y[n][k][pq] for the thread's 8 output channels and two runs of 4 pixels
#pragma unroll
    for (int g = 0; g < 2; ++g) {
        const long long m = m0 + g * 64 + tx * 4;
        if (m >= M) continue;
        const long long n = m / PQ;
        const int pq = (int)(m - n * PQ);
        const bool quad = PQ % 4 == 0;  // then m..m+3 lie in one image, 16-byte aligned
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int k = k0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
            if (k >= K) continue;
            const float add = bias ? bias[k] : 0.0f;
            const float* v = acc[i] + g * 4;
            if (quad) {
                *reinterpret_cast<float4*>(y + ((size_t)n * K + k) * PQ + pq) =
                    make_float4(v[0] + add, v[1] + add, v[2] + add, v[3] + add);
                continue;
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const long long mj = m + j;
                if (mj >= M) break;
                const long long nj = mj / PQ;
                y[((size_t)nj * K + k) * PQ + (mj - nj * PQ)] = v[j] + add;
            }
        }
    }
}
