// Package sgemm is a float32 matrix multiply for the DQN learner's
// shapes (a batch of 64 against layers of 256): C = alpha*op(A)*op(B) +
// beta*C on row-major matrices, as BLAS's Sgemm computes it, with an
// AVX2/FMA kernel on amd64 and a plain Go kernel elsewhere. gonum's
// float32 Sgemm, the default behind gorgonia, is written in Go without
// vector instructions; Implementation puts this one behind gorgonia.Use.
//
// Every element of C is its dot product summed in the order of k, one
// fused multiply-add at a time on the kernel's path: no blocking of k and
// no split of k across goroutines, so a result depends only on the inputs
// and the kernel (not on GOMAXPROCS, the matrix's position in a block, or
// how the work is split), and a run is bit-for-bit repeatable.
package sgemm

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// ErrShape reports dimensions, strides or slice lengths that do not
// describe the matrices (Gemm's errors wrap it).
var ErrShape = errors.New("sgemm: bad matrix shape")

// mr and nr are the kernel's tile: mr rows of op(A) against nr columns
// of op(B) (six rows of two 8-lane registers fill 12 of AVX2's 16).
const (
	mr = 6
	nr = 16
)

// nBlockFloats is about the size of a block of op(B) (whole nr panels)
// packed at a time: with the learner's k of 256 it is the 256 columns of
// a layer, in L2, while each panel in use stays in L1.
const nBlockFloats = 64 << 10

// parallelMACs is the work (m*n*k) from which Gemm splits the columns of
// C across goroutines: below it, starting a goroutine costs more than it
// saves.
const parallelMACs = 1 << 19

// Gemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices:
// op(A) is m×k (A is m×k with row stride lda, or k×m if transA), op(B)
// is k×n (B is k×n with row stride ldb, or n×k if transB), C is m×n with
// row stride ldc. With beta 0, C is written without being read (NaNs in
// it do not propagate), as BLAS specifies. Large products are split by
// columns of C over up to GOMAXPROCS goroutines, each taking the next
// chunk of columns when it is free, which does not change any result. Bad dimensions or short slices return ErrShape and leave C
// unchanged. Gemm is safe for concurrent use on distinct C.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int,
	beta float32, c []float32, ldc int) error {
	if err := check(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc)
		return nil
	}
	g := gemm{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb,
		beta: beta, c: c, ldc: ldc}
	if full := m / mr * mr; full < m {
		// The last rows, fewer than mr, are copied once into a
		// zero-padded panel that every goroutine reads.
		edge := getBuf(mr * k)
		defer bufs.Put(edge)
		packA(*edge, a, lda, transA, k, full, m)
		g.edge = *edge
	}
	panels := (n + nr - 1) / nr
	workers := 1
	if m*n*k >= parallelMACs {
		workers = min(runtime.GOMAXPROCS(0), panels/2)
	}
	if workers <= 1 {
		g.run(0, panels)
		return nil
	}
	// Chunks of whole panels (pairs, for the 512-bit kernel) go to
	// whoever is free: a helper that starts late, on a core busy with
	// other work, finds fewer or none left instead of holding the caller.
	chunk := max(2, (panels/(4*workers)+1)&^1)
	sh := &share{g: &g, panels: panels, chunk: chunk, done: make(chan struct{})}
	sh.pending.Store(int64((panels + chunk - 1) / chunk))
	for range workers - 1 {
		go sh.work()
	}
	sh.work()
	<-sh.done
	return nil
}

// share hands out one Gemm's chunks of panels.
type share struct {
	g             *gemm
	panels, chunk int
	next, pending atomic.Int64
	done          chan struct{} // closed when pending reaches 0
}

// work computes chunks until none are left to claim.
func (sh *share) work() {
	for {
		p0 := int(sh.next.Add(1)-1) * sh.chunk
		if p0 >= sh.panels {
			return
		}
		sh.g.run(p0, min(p0+sh.chunk, sh.panels))
		if sh.pending.Add(-1) == 0 {
			close(sh.done)
		}
	}
}

// check returns ErrShape unless the arguments describe the matrices.
func check(transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("%w: m %d, n %d, k %d", ErrShape, m, n, k)
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	for _, x := range []struct {
		name           string
		rows, cols, ld int
		have           int
	}{{"A", ar, ac, lda, la}, {"B", br, bc, ldb, lb}, {"C", m, n, ldc, lc}} {
		if x.ld < max(1, x.cols) {
			return fmt.Errorf("%w: %s has %d columns and stride %d", ErrShape, x.name, x.cols, x.ld)
		}
		if x.rows > 0 && x.cols > 0 && x.have < (x.rows-1)*x.ld+x.cols {
			return fmt.Errorf("%w: %s (%d×%d, stride %d) in %d values", ErrShape, x.name, x.rows, x.cols, x.ld, x.have)
		}
	}
	return nil
}

// scale sets C = beta*C (0 without reading C when beta is 0).
func scale(m, n int, beta float32, c []float32, ldc int) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// gemm is one call's arguments.
type gemm struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	edge           []float32 // op(A)'s last m%mr rows, packed (see run)
}

// bufs is packing memory, reused across calls.
var bufs = sync.Pool{New: func() any { return new([]float32) }}

func getBuf(n int) *[]float32 {
	p := bufs.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

// run computes the columns of C in nr panels [p0, p1). The kernel reads
// op(A) where it lies, through its row and column strides, except the
// last rows when m is not a multiple of mr, which it reads from g.edge.
// op(B) is packed a block of panels at a time.
func (g *gemm) run(p0, p1 int) {
	if p0 >= p1 {
		return
	}
	k := g.k
	rsA, csA := g.lda, 1
	if g.transA {
		rsA, csA = 1, g.lda
	}
	full := g.m / mr * mr
	nbPanels := max(1, nBlockFloats/(k*nr))
	bp := getBuf(min(nbPanels, p1-p0) * nr * k)
	defer bufs.Put(bp)
	var tile [mr * nr]float32
	for pc := p0; pc < p1; pc += nbPanels {
		pEnd := min(pc+nbPanels, p1)
		j0, j1 := pc*nr, min(pEnd*nr, g.n)
		packB(*bp, g.b, g.ldb, g.transB, k, j0, j1)
		for jr := j0; jr < j1; {
			// Two full panels at once where the CPU has the wider kernel.
			width := nr
			if useAVX512 && jr+2*nr <= j1 {
				width = 2 * nr
			}
			for ir := 0; ir < g.m; ir += mr {
				a, rs, cs := g.a[ir*rsA:], rsA, csA
				if ir == full {
					a, rs, cs = g.edge, 1, mr
				}
				if ir < full && width == 2*nr {
					kernelPair(k, a, rs, cs, (*bp)[(jr-j0)*k:(jr-j0+2*nr)*k], g.c[ir*g.ldc+jr:], g.ldc, g.alpha, g.beta)
					continue
				}
				for j := jr; j < min(jr+width, j1); j += nr {
					g.tile(a, rs, cs, (*bp)[(j-j0)*k:(j-j0+nr)*k], ir, j, min(nr, j1-j), ir < full, &tile)
				}
			}
			jr += width
		}
	}
}

// tile computes the tile of C at rows [ir, ir+mr) (fewer at the end)
// and columns [jr, jr+cols) from A (element (r, q) at a[r*rs+q*cs]) and
// the panel bPanel; full says all mr rows are in C.
func (g *gemm) tile(a []float32, rs, cs int, bPanel []float32, ir, jr, cols int, full bool, tile *[mr * nr]float32) {
	if full && cols == nr {
		kernel(g.k, a, rs, cs, bPanel, g.c[ir*g.ldc+jr:], g.ldc, g.alpha, g.beta)
		return
	}
	kernel(g.k, a, rs, cs, bPanel, tile[:], nr, 1, 0)
	for r := range min(mr, g.m-ir) {
		dst := g.c[(ir+r)*g.ldc+jr : (ir+r)*g.ldc+jr+cols]
		src := tile[r*nr : r*nr+cols]
		if g.beta == 0 {
			for j := range dst {
				dst[j] = g.alpha * src[j]
			}
		} else {
			for j := range dst {
				dst[j] = g.alpha*src[j] + g.beta*dst[j]
			}
		}
	}
}

// packA writes rows [i0, i1) of op(A), at most mr, into dst as one panel
// of k groups of mr values (one column of the panel after another), rows
// past i1 zero.
func packA(dst, a []float32, lda int, trans bool, k, i0, i1 int) {
	clear(dst[:mr*k])
	for r := range i1 - i0 {
		for q := range k {
			if trans {
				dst[q*mr+r] = a[q*lda+i0+r]
			} else {
				dst[q*mr+r] = a[(i0+r)*lda+q]
			}
		}
	}
}

// packB writes columns [j0, j1) of op(B) into dst as nr-column panels,
// each k rows of nr values, columns past j1 zero.
func packB(dst, b []float32, ldb int, trans bool, k, j0, j1 int) {
	for jr := j0; jr < j1; jr += nr {
		p := dst[(jr-j0)*k : (jr-j0+nr)*k]
		cols := min(nr, j1-jr)
		switch {
		case cols < nr:
			clear(p)
			for j := range cols {
				for q := range k {
					if trans {
						p[q*nr+j] = b[(jr+j)*ldb+q]
					} else {
						p[q*nr+j] = b[q*ldb+jr+j]
					}
				}
			}
		case !trans:
			// op(B)[q][j] = b[q*ldb+j]: each row is a run of a row of B.
			for q := range k {
				*(*[nr]float32)(p[q*nr:]) = *(*[nr]float32)(b[q*ldb+jr:])
			}
		default:
			packPanelT(p, b, ldb, k, jr)
		}
	}
}

// packPanelTGo writes the rows [q0, k) of the panel of op(B) = B^T for
// columns [jr, jr+nr): dst[q*nr+j] = b[(jr+j)*ldb+q], reading each row of
// B in order and writing a column of the panel (in L1) at a stride of nr.
func packPanelTGo(dst, b []float32, ldb, k, jr, q0 int) {
	if q0 >= k {
		return
	}
	for j := range nr {
		src := b[(jr+j)*ldb+q0 : (jr+j)*ldb+k]
		d := dst[q0*nr+j : (k-1)*nr+j+1]
		for q, v := range src {
			d[q*nr] = v
		}
	}
}

// kernelGo is the kernel in Go: c (mr rows of nr, row stride ldc) =
// alpha*acc + beta*c, acc the product of the mr×k matrix whose element
// (r, q) is a[r*rsA+q*csA] and the packed panel bp (k rows of nr); c is
// not read when beta is 0.
func kernelGo(k int, a []float32, rsA, csA int, bp, c []float32, ldc int, alpha, beta float32) {
	var acc [mr][nr]float32
	bp = bp[:k*nr]
	for q := range k {
		b := (*[nr]float32)(bp[q*nr:])
		for r := range mr {
			x := a[r*rsA+q*csA]
			row := &acc[r]
			for j := range nr {
				row[j] += x * b[j]
			}
		}
	}
	for r := range mr {
		dst := (*[nr]float32)(c[r*ldc:])
		for j := range nr {
			if beta == 0 {
				dst[j] = alpha * acc[r][j]
			} else {
				dst[j] = alpha*acc[r][j] + beta*dst[j]
			}
		}
	}
}
