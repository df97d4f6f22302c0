// TANDEM_HD: a function the CUDA kernels and the host tests share. Under nvcc
// it is compiled for both sides (__host__ __device__); under a plain C++
// compiler it is an ordinary inline function.
#pragma once

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif
