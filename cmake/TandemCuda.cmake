# The CUDA backend (src/cuda, docs/cuda.md): its host-side planning code is plain
# C++ and always built; its kernels (.cu) only when this resolves TANDEM_CUDA_ENABLED.
#
#   TANDEM_CUDA=AUTO (default)  build the kernels when nvcc is found, so that
#                               `make test` compiles them wherever nvcc exists
#   TANDEM_CUDA=ON              build them, or fail when there is no nvcc
#   TANDEM_CUDA=OFF             never
#
# AUTO stays off under the sanitizer and fuzz builds: their flags are for the
# host compiler, and the kernels have nothing for them to check.
#
# One architecture: sm_90a machine code (the H100 of ../shared/gpu/README.md)
# plus compute_90a PTX, to keep nvcc's share of the build to a few minutes.
# cudart is linked statically (CUDA::cudart_static), so a binary needs only the
# driver's libcuda on the machine that runs it.
set(TANDEM_CUDA AUTO CACHE STRING "Build the CUDA kernels: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE TANDEM_CUDA PROPERTY STRINGS AUTO ON OFF)

set(TANDEM_CUDA_ENABLED OFF)
if(TANDEM_CUDA STREQUAL "ON")
  set(TANDEM_CUDA_ENABLED ON)
elseif(TANDEM_CUDA STREQUAL "AUTO" AND NOT (TANDEM_SANITIZE OR TANDEM_TSAN OR TANDEM_FUZZ))
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TANDEM_CUDA_ENABLED ON)
  endif()
endif()

if(TANDEM_CUDA_ENABLED)
  # The architectures are given as flags below (CMake 3.25 knows no "90a").
  set(CMAKE_CUDA_ARCHITECTURES OFF)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # CMake 3.25 knows nvcc's dialect flags only up to C++17; nvcc 12+ takes C++20.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_FLAGS_RELEASE "-O3 -DNDEBUG")
  # -fmad=false: no product is fused into an add unless the code says fmaf, so a
  # weight decodes on the device to the same bits as on the host (the layout
  # tests check the host side) and every reduction is exactly what is written.
  set(TANDEM_CUDA_FLAGS "-gencode=arch=compute_90a,code=[sm_90a,compute_90a]" -fmad=false
      -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
  if(TANDEM_WERROR)
    list(APPEND TANDEM_CUDA_FLAGS -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  message(STATUS "CUDA backend: kernels built with ${CMAKE_CUDA_COMPILER} "
                 "(${CMAKE_CUDA_COMPILER_VERSION}) for sm_90a + compute_90a PTX")
else()
  message(STATUS "CUDA backend: kernels not built (TANDEM_CUDA=${TANDEM_CUDA}); "
                 "host-side planning only")
endif()
