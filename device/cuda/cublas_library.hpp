#pragma once
// cuBLAS and cuBLASLt, opened with dlopen when the first CUDA backend is made instead of linked.
// Linking them runs their static initialisers in every process of recmix, a CPU-only run, `recmix
// --help` and every test included: about 0.5 s of CPU a process start on the build machines
// (a program that does nothing, linked to libcublasLt: 0.5 s of user and system time; unlinked:
// none; docs/device.md). The functions the backend calls are resolved once, each by the name
// cublas_v2.h maps it to (cublasSgemm is cublasSgemm_v2), and typed by its declaration there.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <string>

namespace recmix::device::cuda {

// cublasGemmEx with a cublasComputeType_t (C++ sees a second, deprecated overload).
using GemmExFunction = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                          const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                          int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                          cublasGemmAlgo_t);

// X(member, type, function): every cuBLAS and cuBLASLt function the CUDA backend calls.
#define RECMIX_CUBLAS_FUNCTIONS(X)                              \
  X(create, decltype(&cublasCreate), cublasCreate)                                       \
  X(destroy, decltype(&cublasDestroy), cublasDestroy)                                     \
  X(set_math_mode, decltype(&cublasSetMathMode), cublasSetMathMode)                           \
  X(set_stream, decltype(&cublasSetStream), cublasSetStream)                                \
  X(set_workspace, decltype(&cublasSetWorkspace), cublasSetWorkspace)                          \
  X(sgemm, decltype(&cublasSgemm), cublasSgemm)                                         \
  X(gemm_ex, GemmExFunction, cublasGemmEx)
#define RECMIX_CUBLASLT_FUNCTIONS(X)                            \
  X(lt_create, decltype(&cublasLtCreate), cublasLtCreate)                                  \
  X(lt_destroy, decltype(&cublasLtDestroy), cublasLtDestroy)                                \
  X(lt_matmul, decltype(&cublasLtMatmul), cublasLtMatmul)                                  \
  X(lt_desc_create, decltype(&cublasLtMatmulDescCreate), cublasLtMatmulDescCreate)                   \
  X(lt_desc_destroy, decltype(&cublasLtMatmulDescDestroy), cublasLtMatmulDescDestroy)                 \
  X(lt_desc_set, decltype(&cublasLtMatmulDescSetAttribute), cublasLtMatmulDescSetAttribute)                \
  X(lt_layout_create, decltype(&cublasLtMatrixLayoutCreate), cublasLtMatrixLayoutCreate)               \
  X(lt_layout_destroy, decltype(&cublasLtMatrixLayoutDestroy), cublasLtMatrixLayoutDestroy)             \
  X(lt_preference_create, decltype(&cublasLtMatmulPreferenceCreate), cublasLtMatmulPreferenceCreate)       \
  X(lt_preference_destroy, decltype(&cublasLtMatmulPreferenceDestroy), cublasLtMatmulPreferenceDestroy)     \
  X(lt_preference_set, decltype(&cublasLtMatmulPreferenceSetAttribute), cublasLtMatmulPreferenceSetAttribute)    \
  X(lt_heuristic, decltype(&cublasLtMatmulAlgoGetHeuristic), cublasLtMatmulAlgoGetHeuristic)

struct CublasLibrary {
#define RECMIX_CUBLAS_MEMBER(member, type, function) type member = nullptr;
  RECMIX_CUBLAS_FUNCTIONS(RECMIX_CUBLAS_MEMBER)
  RECMIX_CUBLASLT_FUNCTIONS(RECMIX_CUBLAS_MEMBER)
#undef RECMIX_CUBLAS_MEMBER
  std::string cublas_path, cublaslt_path;  // the files opened (dlinfo's names)
};

// The libraries, opened and resolved on the first call (thread-safe). Throws DeviceError naming
// the library or the function and dlerror()'s reason when one cannot be had; the libraries are
// looked for by their sonames (libcublas.so.<major> of the toolkit this was built with) on the
// loader's path, then beside the CUDA runtime this program loaded.
const CublasLibrary& cublas();

// Whether this process has the cuBLAS libraries loaded (for tests: they are not before cublas()).
bool cublas_loaded();

}  // namespace recmix::device::cuda
