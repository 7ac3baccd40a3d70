package sgemm

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Implementation is gonum's BLAS with Sgemm computed by Gemm, for
// gorgonia.Use and tensor.Use (which take a whole BLAS). Like every
// blas.Float32, it panics on arguments that do not describe the matrices:
// those calls go to gonum's Sgemm, whose panic messages callers of the
// BLAS interface expect. A zero value is ready; it is safe for concurrent
// use on distinct outputs.
type Implementation struct{ gonum.Implementation }

// Sgemm computes C = alpha*op(A)*op(B) + beta*C with Gemm.
func (Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	if validTrans(tA) && validTrans(tB) &&
		Gemm(tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == nil {
		return
	}
	gonum.Implementation{}.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func validTrans(t blas.Transpose) bool {
	return t == blas.NoTrans || t == blas.Trans || t == blas.ConjTrans
}
