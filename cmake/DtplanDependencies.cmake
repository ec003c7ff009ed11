# Debian 12 packages (scripts/setup-debian.sh installs them).
find_package(yaml-cpp REQUIRED)          # 0.7: target `yaml-cpp`, no namespace
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)              # zlib1g-dev: gzip'd traces
# OpenBLAS: the cpu calibration backend's GEMM (libopenblas-dev).
find_library(DTPLAN_OPENBLAS_LIBRARY NAMES openblas PATH_SUFFIXES openblas-pthread)
find_path(DTPLAN_OPENBLAS_INCLUDE openblas-pthread/cblas.h PATHS /usr/include/x86_64-linux-gnu)
if(NOT DTPLAN_OPENBLAS_LIBRARY OR NOT DTPLAN_OPENBLAS_INCLUDE)
  message(FATAL_ERROR "OpenBLAS not found (apt-get install libopenblas-dev; scripts/setup-debian.sh)")
endif()

# CUDA: AUTO builds the CUDA calibration backend when the toolkit and NCCL are found.
set(DTPLAN_HAVE_CUDA OFF)
if(NOT DTPLAN_CUDA STREQUAL "OFF")
  if(EXISTS /usr/local/cuda AND NOT CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_path(DTPLAN_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
  find_library(DTPLAN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
  if(CUDAToolkit_FOUND AND DTPLAN_NCCL_INCLUDE AND DTPLAN_NCCL_LIBRARY)
    set(DTPLAN_HAVE_CUDA ON)
  elseif(DTPLAN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DTPLAN_CUDA=ON but the CUDA toolkit with cuBLAS and NCCL was not found "
                        "(looked in /usr/local/cuda and the default paths)")
  endif()
endif()

set(DTPLAN_HAVE_MPI OFF)
if(NOT DTPLAN_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(DTPLAN_HAVE_MPI ON)
  elseif(DTPLAN_MPI STREQUAL "ON")
    message(FATAL_ERROR "DTPLAN_MPI=ON but no MPI was found (apt-get install libopenmpi-dev openmpi-bin)")
  endif()
endif()
