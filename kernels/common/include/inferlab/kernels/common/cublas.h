#pragma once
// One cuBLAS / cuBLASLt handle per thread and device, created on first use, and a checked call macro.
#include <cublasLt.h>
#include <cublas_v2.h>

namespace inferlab {

cublasHandle_t cublas_handle();
cublasLtHandle_t cublaslt_handle();
void cublas_check(cublasStatus_t status, const char* what, const char* file, int line);

}  // namespace inferlab

#define INFERLAB_CUBLAS_CHECK(expr) ::inferlab::cublas_check((expr), #expr, __FILE__, __LINE__)
