//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// useFMA selects the assembly kernel (AVX2 registers, FMA3 fused
// multiply-adds); tests switch it to compare it with kernelGo.
var useFMA = hasFMA

// hasFMA is whether the CPU can run the assembly kernel.
var hasFMA = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// useAVX512 selects kernelPair's 512-bit kernel (tests switch it).
var useAVX512 = hasAVX512

// hasAVX512 is whether the CPU (and OS) can run the 512-bit kernel.
var hasAVX512 = hasFMA && cpu.X86.HasAVX512F

// kernelPair is kernel over two adjacent packed panels bp (2*nr columns
// of c), in one pass of the 512-bit kernel; only called when useAVX512.
// Each element is the same chain of fused multiply-adds as in kernel,
// so the two give the same bits.
func kernelPair(k int, a []float32, rsA, csA int, bp, c []float32, ldc int, alpha, beta float32) {
	// The assembly reads and writes these ranges: check them here.
	_, _, _ = a[(mr-1)*rsA+(k-1)*csA], bp[2*k*nr-1], c[(mr-1)*ldc+2*nr-1]
	kernelAVX512(k, &a[0], rsA, csA, &bp[0], &c[0], ldc, alpha, beta)
}

// kernelAVX512 is kernelFMA on 512-bit registers over two panels (the
// second k*nr floats after the first).
//
//go:noescape
func kernelAVX512(k int, a *float32, rsA, csA int, bp, c *float32, ldc int, alpha, beta float32)

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

// packPanelT writes the panel of op(B) = B^T for columns [jr, jr+nr)
// (rows jr.. of B, nr of them, k long): dst[q*nr+j] = b[(jr+j)*ldb+q],
// eight-by-eight blocks in AVX where the CPU has AVX2 and FMA, the
// rest in Go.
func packPanelT(dst, b []float32, ldb, k, jr int) {
	k8 := 0
	if useFMA {
		k8 = k &^ 7
	}
	if k8 > 0 {
		_, _ = dst[k8*nr-1], b[(jr+nr-1)*ldb+k8-1]
		transposePanel(&dst[0], &b[jr*ldb], ldb, k8)
	}
	packPanelTGo(dst, b, ldb, k, jr, k8)
}

// transposePanel is packPanelT's vector loop over the first k8 (a
// positive multiple of 8) rows of the panel.
//
//go:noescape
func transposePanel(dst, src *float32, ldb, k8 int)
