package prefetch

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// BenchmarkRows gathers 256 random rows of a 256 MiB ring (far past the
// caches; other rows each call) into a dense output a chunk of 16 rows at
// a time, as the cpu backend's gathers do: with the next chunk's rows
// prefetched by Rows before a chunk is copied (t0), and without (none).
// The rows are a 68-byte field of 96-byte packed records and a 3,072-byte
// pixel step:
//
//	go test -run '^$' -bench 'Rows/' -count 5 ./internal/prefetch/
func BenchmarkRows(b *testing.B) {
	const n, ahead, sets = 256, 16, 1024
	ring := mapRing(b, 256<<20)
	for i := 0; i < len(ring); i += 4096 {
		ring[i] = byte(i >> 12) // every page touched before the timing
	}
	base := unsafe.Pointer(&ring[0])
	for _, rc := range []struct{ size, stride int64 }{{68, 96}, {3072, 3072}} {
		rng := rand.New(rand.NewPCG(1, uint64(rc.size)))
		all := make([]int64, n*sets)
		for i := range all {
			all[i] = rng.Int64N(int64(len(ring)) / rc.stride)
		}
		out := make([]byte, n*rc.size)
		for _, name := range []string{"none", "t0"} {
			b.Run(fmt.Sprintf("size=%d/%s", rc.size, name), func(b *testing.B) {
				if name == "t0" && !Enabled {
					b.Skip("prefetches are no-ops in this build")
				}
				on := name == "t0"
				b.SetBytes(n * rc.size)
				set := 0
				for b.Loop() {
					idx := all[set*n : (set+1)*n]
					set = (set + 1) % sets
					if on {
						Rows(base, idx[:ahead], rc.stride, rc.size)
					}
					for lo := 0; lo < n; lo += ahead {
						hi := min(lo+ahead, n)
						if on {
							Rows(base, idx[hi:min(hi+ahead, n)], rc.stride, rc.size)
						}
						for i, ix := range idx[lo:hi] {
							copy(out[int64(lo+i)*rc.size:][:rc.size], ring[ix*rc.stride:][:rc.size])
						}
					}
				}
			})
		}
	}
}
