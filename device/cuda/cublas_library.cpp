#include "device/cuda/cublas_library.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <mutex>

#include "core/error.hpp"

namespace recmix::device::cuda {

namespace {

#define RECMIX_STRINGIFY(x) #x
#define RECMIX_EXPANDED_NAME(x) RECMIX_STRINGIFY(x)

// The sonames of the toolkit this was built with (cuBLAS and cuBLASLt share its major version).
const std::string kCublasSoname = "libcublas.so." RECMIX_EXPANDED_NAME(CUBLAS_VER_MAJOR);
const std::string kCublasLtSoname = "libcublasLt.so." RECMIX_EXPANDED_NAME(CUBLAS_VER_MAJOR);

// The folder of the CUDA runtime library this program loaded ("" when unknown): a toolkit keeps
// cuBLAS beside it.
std::string runtime_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 || !info.dli_fname) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

std::string loaded_path(void* handle) {
  link_map* map = nullptr;
  return dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? map->l_name : "";
}

// dlopen by soname, then beside the CUDA runtime. Never closed: the backends may live until exit.
void* open_library(const std::string& soname) {
  if (void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const std::string first_error = dlerror();
  if (const std::string folder = runtime_folder(); !folder.empty())
    if (void* h = dlopen((folder + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  throw DeviceError("the CUDA backend needs " + soname + ", which cannot be loaded (" + first_error +
                    "); add its folder to LD_LIBRARY_PATH");
}

template <class F>
void resolve(void* handle, const std::string& library, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  if (!out) throw DeviceError(library + " has no function " + name + " (a cuBLAS older than this build's?)");
}

CublasLibrary load() {
  CublasLibrary lib;
  void* lt = open_library(kCublasLtSoname);  // first: libcublas itself needs it
  void* blas = open_library(kCublasSoname);
#define RECMIX_RESOLVE_BLAS(member, type, function) resolve(blas, kCublasSoname, RECMIX_EXPANDED_NAME(function), lib.member);
#define RECMIX_RESOLVE_LT(member, type, function) resolve(lt, kCublasLtSoname, RECMIX_EXPANDED_NAME(function), lib.member);
  RECMIX_CUBLAS_FUNCTIONS(RECMIX_RESOLVE_BLAS)
  RECMIX_CUBLASLT_FUNCTIONS(RECMIX_RESOLVE_LT)
#undef RECMIX_RESOLVE_BLAS
#undef RECMIX_RESOLVE_LT
  lib.cublas_path = loaded_path(blas);
  lib.cublaslt_path = loaded_path(lt);
  return lib;
}

std::once_flag once;
CublasLibrary library;

}  // namespace

const CublasLibrary& cublas() {
  // A failed load throws out of call_once, which leaves the flag unset: the next call tries again.
  std::call_once(once, [] { library = load(); });
  return library;
}

bool cublas_loaded() {
  void* h = dlopen(kCublasLtSoname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  dlclose(h);
  return true;
}

}  // namespace recmix::device::cuda
