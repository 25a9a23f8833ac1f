// cuBLAS and cuBLASLt are opened when the first CUDA backend is made, not linked
// (device/cuda/cublas_library.hpp). Runs without a GPU: the libraries load on any machine with the
// toolkit.
#include <gtest/gtest.h>

#include <string>

#include "device/cuda/cublas_library.hpp"

using recmix::device::cuda::cublas;
using recmix::device::cuda::cublas_loaded;

// First in the program: nothing has opened them yet, so no process of recmix pays their start-up
// unless it makes a CUDA backend.
TEST(CublasLibrary, IsNotLoadedUntilAsked) { EXPECT_FALSE(cublas_loaded()); }

TEST(CublasLibrary, OpensAndResolvesEveryFunction) {
  const auto& lib = cublas();
  EXPECT_TRUE(cublas_loaded());
#define RECMIX_EXPECT_RESOLVED(member, type, function) EXPECT_NE(lib.member, nullptr) << #function;
  RECMIX_CUBLAS_FUNCTIONS(RECMIX_EXPECT_RESOLVED)
  RECMIX_CUBLASLT_FUNCTIONS(RECMIX_EXPECT_RESOLVED)
#undef RECMIX_EXPECT_RESOLVED
  EXPECT_NE(lib.cublas_path.find("libcublas.so"), std::string::npos) << lib.cublas_path;
  EXPECT_NE(lib.cublaslt_path.find("libcublasLt.so"), std::string::npos) << lib.cublaslt_path;
  EXPECT_EQ(&cublas(), &lib);  // opened once
}
