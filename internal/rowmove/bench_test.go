package rowmove

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"github.com/trajring/trajring/internal/prefetch"
)

// newRing returns a ring of n bytes (mapRing) with every page touched.
func newRing(b *testing.B, n int) []byte {
	ring := mapRing(b, n)
	for i := 0; i < len(ring); i += 4096 {
		ring[i] = byte(i >> 12)
	}
	return ring
}

// benchGather moves n random rows of size bytes from ring, rows stride
// apart, into a dense output with move. With cold set, each call takes
// the next of 1,024 sets of rows (so that a row is rarely still cached
// from an earlier call on a ring past the caches) and the rows of the
// next chunk of 16 are prefetched before a chunk is moved, as the cpu
// gathers do; else every call moves the same rows.
func benchGather(b *testing.B, ring []byte, stride, size int64, n int, cold bool, move func(dst, src unsafe.Pointer, idx []int64)) {
	const ahead = 16
	steps := int64(len(ring)) / stride
	sets := 1
	if cold {
		sets = 1024
	}
	out := make([]byte, int64(n)*size)
	rng := rand.New(rand.NewPCG(uint64(size), uint64(stride)))
	all := make([]int64, n*sets)
	for i := range all {
		all[i] = rng.Int64N(steps)
	}
	src, dst := unsafe.Pointer(&ring[0]), unsafe.Pointer(&out[0])
	b.SetBytes(int64(n) * size)
	set := 0
	for b.Loop() {
		idx := all[set*n : (set+1)*n]
		if set++; set == sets {
			set = 0
		}
		if !cold {
			move(dst, src, idx)
			continue
		}
		prefetch.Rows(src, idx[:min(n, ahead)], stride, size)
		for lo := 0; lo < n; lo += ahead {
			hi := min(lo+ahead, n)
			prefetch.Rows(src, idx[hi:min(hi+ahead, n)], stride, size)
			move(unsafe.Add(dst, int64(lo)*size), src, idx[lo:hi])
		}
	}
}

// BenchmarkRows moves 256 random rows of a cached ring of 10,000 steps
// (the column of a low-dimensional field in a sample of a small buffer)
// with copy per row (go: rowsGo, what the purego build runs), the
// assembly's 16-byte words (sse) and its 32-byte words (avx2: the
// "wide" implementation of internal/impl, which changes only rows of 33
// to 128 bytes). Run the three in one binary:
//
//	go test -run '^$' -bench 'Rows/' -count 5 ./internal/rowmove/
func BenchmarkRows(b *testing.B) {
	ring := newRing(b, 10000*160)
	for _, size := range []int64{8, 24, 68, 128} {
		stride := (size + 16 + 15) &^ 15 // a packed record with other columns
		for _, name := range []string{"go", "sse", "avx2"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, name), func(b *testing.B) {
				defer impl.Reset("rowmove")
				move := Rows
				switch name {
				case "go":
					move = rowsGo
				case "sse":
					if !enabled {
						b.Skip("no assembly in this build")
					}
					impl.Set("rowmove", "wide", false)
				case "avx2":
					if !enabled || !impl.Set("rowmove", "wide", true) {
						b.Skip("no AVX2 loops here")
					}
				}
				benchGather(b, ring[:10000*stride], stride, size, 256, false, func(dst, src unsafe.Pointer, idx []int64) {
					move(dst, src, idx, stride, size)
				})
			})
		}
	}
}

// BenchmarkRowsRep moves 256 random rows of a 256 MiB ring (far past the
// caches, as the pixels of a large buffer are; other rows each call),
// prefetched a chunk of 16 rows ahead as the cpu gathers do, with copy per row (copy: Rows with
// the "rep" implementation of internal/impl off) and with REP MOVSB (rep:
// rowsRep, which Rows runs from repMin bytes with it on), at sizes below
// and above repMin:
//
//	go test -run '^$' -bench RowsRep -count 5 ./internal/rowmove/
func BenchmarkRowsRep(b *testing.B) {
	ring := newRing(b, 256<<20)
	for _, size := range []int64{160, 192, repMin, 384, 3072} {
		for _, name := range []string{"copy", "rep"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, name), func(b *testing.B) {
				defer impl.Reset("rowmove")
				if !impl.Set("rowmove", "rep", name == "rep") {
					b.Skip("no REP MOVSB loop here")
				}
				move := Rows
				if name == "rep" {
					move = rowsRep
				}
				benchGather(b, ring, size, size, 256, true, func(dst, src unsafe.Pointer, idx []int64) {
					move(dst, src, idx, size, size)
				})
			})
		}
	}
}
