// DenseGemm (linear.h). cuBLAS is column-major, so it computes Yᵀ[n, m] = W[n, k] · Xᵀ[k, m]:
//   W, row-major [n, k], is column-major k×n with ld k, used transposed   (op A = T)
//   X, row-major [m, k], is column-major k×m with ld k, used as is        (op B = N)
//   Y, row-major [m, n], is column-major n×m with ld n
// That is "TN", the only layout cuBLASLt accepts for fp8 on sm_90; bf16/fp16 use it too.
#include <stdexcept>
#include <string>

#include "inferlab/kernels/common/cublas.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/gemm/linear.h"

namespace inferlab {

struct DenseGemm::Lt {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  DeviceBuffer<float> one{1};                              // the scale of X or W when none is given
  DeviceBuffer<unsigned char> workspace{32u << 20};        // cuBLAS' recommendation for Hopper
  ~Lt() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (y) cublasLtMatrixLayoutDestroy(y);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

DenseGemm::DenseGemm(DType dtype, int m, int n, int k, bool fast_accum) : dtype_(dtype), m_(m), n_(n), k_(k) {
  if (m <= 0 || n <= 0 || k <= 0) throw std::invalid_argument("DenseGemm: m, n, k must be positive");
  if (dtype == DType::bf16 || dtype == DType::fp16) {
    if (fast_accum) throw std::invalid_argument("DenseGemm: fast_accum applies to fp8_e4m3 only");
    return;  // cublasGemmEx needs no plan
  }
  if (dtype != DType::fp8_e4m3)
    throw std::invalid_argument("DenseGemm: unsupported dtype " + dtype_name(dtype) + " (bf16, fp16, fp8_e4m3)");
  // cuBLASLt fp8: leading dimensions must be multiples of 16 bytes (k fp8 inputs, n bf16 outputs).
  if (k % 16 != 0 || n % 8 != 0)
    throw std::invalid_argument("DenseGemm: fp8 needs k % 16 == 0 and n % 8 == 0, got n=" + std::to_string(n) +
                                " k=" + std::to_string(k));
  lt_ = std::make_unique<Lt>();
  Lt& p = *lt_;
  p.one.upload({1.0f});
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  const int8_t fast = fast_accum ? 1 : 0;
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  INFERLAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w, CUDA_R_8F_E4M3, k, n, k));
  INFERLAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.x, CUDA_R_8F_E4M3, k, m, k));
  INFERLAB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.y, CUDA_R_16BF, n, m, n));  // C and D alike
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p.pref));
  const std::size_t ws = p.workspace.bytes();
  INFERLAB_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const void* scale = p.one.get();  // the scale pointers must be set for the heuristic to pick a scaled kernel
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof(scale)));
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof(scale)));
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), p.desc, p.w, p.x, p.y, p.y, p.pref, 1,
                                                       &result, &found));
  if (found == 0) throw std::runtime_error("DenseGemm: cuBLASLt found no fp8 algorithm for this shape");
  p.algo = result.algo;
}

DenseGemm::~DenseGemm() = default;

void DenseGemm::run(const void* x, const void* w, void* y, cudaStream_t stream, const float* x_scale,
                    const float* w_scale) const {
  const float alpha = 1.0f, beta = 0.0f;
  if (!lt_) {
    const cudaDataType_t t = dtype_ == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    cublasHandle_t h = cublas_handle();
    INFERLAB_CUBLAS_CHECK(cublasSetStream(h, stream));
    INFERLAB_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n_, m_, k_, &alpha, w, t, k_, x, t, k_, &beta, y,
                                       t, n_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  // A is W, B is X (see the top of this file).
  const void* a_scale = w_scale ? static_cast<const void*>(w_scale) : lt_->one.get();
  const void* b_scale = x_scale ? static_cast<const void*>(x_scale) : lt_->one.get();
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt_->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
  INFERLAB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt_->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
  INFERLAB_CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), lt_->desc, &alpha, w, lt_->w, x, lt_->x, &beta, y, lt_->y, y,
                                       lt_->y, &lt_->algo, lt_->workspace.get(), lt_->workspace.bytes(), stream));
}

}  // namespace inferlab
