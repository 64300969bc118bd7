// Hold most of GPU 0's memory, as another process on a shared GPU would: leave LEAVE_MIB (argv[1], default
// 1536) free, print what was taken, then sleep until killed. Plain cudaMalloc, no managed memory.
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cuda_runtime.h>

int main(int argc, char ** argv) {
    size_t leave = (size_t) (argc > 1 ? atol(argv[1]) : 1536) << 20;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) { fprintf(stderr, "hog: cudaMemGetInfo failed\n"); return 1; }
    size_t want = free_b > leave ? free_b - leave : 0, got = 0;
    // in chunks of 1 GiB, then smaller ones, until `want` is held
    for (size_t chunk = (size_t) 1 << 30; chunk >= ((size_t) 1 << 20) && got < want; ) {
        void * p = nullptr;
        if (want - got >= chunk && cudaMalloc(&p, chunk) == cudaSuccess) { got += chunk; } else { cudaGetLastError(); chunk /= 2; }
    }
    cudaMemGetInfo(&free_b, &total_b);
    printf("hog: holding %zu MiB, %zu MiB of %zu MiB free\n", got >> 20, free_b >> 20, total_b >> 20);
    fflush(stdout);
    for (;;) sleep(60);
}
