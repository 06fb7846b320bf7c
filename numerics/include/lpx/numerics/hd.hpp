// LPX_HD marks functions that are compiled for both host and device. The scalar codec
// and the Philox keying are written once with it, so CUDA kernels call the very same
// code as the CPU reference. Without nvcc it expands to nothing.
#pragma once

#if defined(__CUDACC__)
#define LPX_HD __host__ __device__
#else
#define LPX_HD
#endif
