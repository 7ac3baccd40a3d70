//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// useFMA selects the assembly kernel (AVX2 registers, FMA3 fused
// multiply-adds); tests switch it to compare it with kernelGo.
var useFMA = hasFMA

// hasFMA is whether the CPU can run the assembly kernel.
var hasFMA = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kernel is kernelGo's contract: c (mr rows of nr, row stride ldc) =
// alpha*acc + beta*c with acc the product of A (element (r, q) at
// a[r*rsA+q*csA]) and the packed panel bp.
func kernel(k int, a []float32, rsA, csA int, bp, c []float32, ldc int, alpha, beta float32) {
	if !useFMA {
		kernelGo(k, a, rsA, csA, bp, c, ldc, alpha, beta)
		return
	}
	// The assembly reads and writes these ranges: check them here.
	_, _, _ = a[(mr-1)*rsA+(k-1)*csA], bp[k*nr-1], c[(mr-1)*ldc+nr-1]
	kernelFMA(k, &a[0], rsA, csA, &bp[0], &c[0], ldc, alpha, beta)
}

// kernelFMA is kernel for k >= 1 on AVX2 and FMA3: each element of acc
// is summed in the order of k by fused multiply-adds.
//
//go:noescape
func kernelFMA(k int, a *float32, rsA, csA int, bp, c *float32, ldc int, alpha, beta float32)
