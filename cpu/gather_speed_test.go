package cpu

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// The gather as it was before the chunked prefetch (move.go at the 8-ary
// tree commit), kept as the same-run yardstick of TestGatherSpeed.

// oldWindowsTyped is gatherWindows for one column of 1-, 4- or 8-byte steps;
// it reports false when the memory is unaligned.
func oldWindowsTyped[T word](out, ring, pad []byte, wins []kernels.Window, seqLen, capacity int64, lo, hi int) bool {
	o, ok1 := words[T](out)
	r, ok2 := words[T](ring)
	if !ok1 || !ok2 {
		return false
	}
	var p T
	if pad != nil {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p)), pad) // pad may be unaligned
	}
	for b := lo; b < hi; b++ {
		w := wins[b]
		dst := o[int64(b)*seqLen : int64(b+1)*seqLen]
		slot, base := w.Start%capacity, w.Row*capacity
		for t := range w.Len {
			dst[t] = r[base+slot]
			if slot++; slot == capacity {
				slot = 0
			}
		}
		for t := w.Len; t < seqLen; t++ {
			dst[t] = p
		}
	}
	return true
}

// oldGatherWindows moves windows [lo, hi) of every column, and their mask.
func oldGatherWindows(cols []kernels.Column, wins []kernels.Window, seqLen, capacity int64, mask kernels.Arena, maskOff int64, lo, hi int) {
	for c := range cols {
		ring := cols[c].Ring.(*Arena).b
		out := cols[c].Out.(*Arena).b[cols[c].OutOff:]
		s, pad := cols[c].StepBytes, cols[c].Pad
		switch s {
		case 1:
			if oldWindowsTyped[uint8](out, ring, pad, wins, seqLen, capacity, lo, hi) {
				continue
			}
		case 4:
			if oldWindowsTyped[uint32](out, ring, pad, wins, seqLen, capacity, lo, hi) {
				continue
			}
		case 8:
			if oldWindowsTyped[uint64](out, ring, pad, wins, seqLen, capacity, lo, hi) {
				continue
			}
		}
		for b := lo; b < hi; b++ {
			w := wins[b]
			dst := out[int64(b)*seqLen*s : int64(b+1)*seqLen*s]
			slot, base := w.Start%capacity, w.Row*capacity
			first := min(w.Len, capacity-slot) // steps before the wrap
			copy(dst[:first*s], ring[(base+slot)*s:(base+slot+first)*s])
			copy(dst[first*s:w.Len*s], ring[base*s:(base+w.Len-first)*s])
			rest := dst[w.Len*s:]
			if pad == nil {
				clear(rest)
				continue
			}
			for len(rest) > 0 {
				rest = rest[copy(rest, pad):]
			}
		}
	}
	if mask == nil {
		return
	}
	m := mask.(*Arena).b[maskOff:]
	for b := lo; b < hi; b++ {
		row := m[int64(b)*seqLen : int64(b+1)*seqLen]
		l := wins[b].Len
		for t := range row {
			row[t] = 0
			if int64(t) < l {
				row[t] = 1
			}
		}
	}
}

var _ = unsafe.Pointer(nil)

// TestGatherSpeed times the window gather (L=1, one step per window, as
// a uniform sample) the old way, the new way without prefetch and the new
// way with it, interleaved round after round over the same random rows of
// rings larger than the last-level cache, and logs the median ratios. It
// runs only with TRAJRING_GATHERBENCH=1.
func TestGatherSpeed(t *testing.T) {
	if os.Getenv("TRAJRING_GATHERBENCH") == "" {
		t.Skip("set TRAJRING_GATHERBENCH=1")
	}
	be := New()
	layouts := []struct {
		name  string
		steps int64
		cols  []int64
	}{
		{"lowdim", 1 << 20, []int64{68, 24, 4, 4, 4, 4}},
		{"pixels", 1 << 17, []int64{3072, 4, 4, 4, 4, 4}},
	}
	for _, lay := range layouts {
		const maxB = 65536
		var cols []kernels.Column
		for _, s := range lay.cols {
			ring, err := be.Alloc(lay.steps * s)
			if err != nil {
				t.Fatal(err)
			}
			rb := ring.(*Arena).b
			for i := range rb {
				rb[i] = byte(i)
			}
			out, _ := be.AllocOutput(maxB * s)
			cols = append(cols, kernels.Column{Ring: ring, StepBytes: s, Out: out})
		}
		mask, _ := be.AllocOutput(maxB)
		rng := rand.New(rand.NewPCG(1, 2))
		const capacity = 4096
		for _, n := range []int{256, 4096, 65536} {
			if lay.name == "pixels" && n > 4096 {
				continue
			}
			draws := make([][]kernels.Window, 64)
			for k := range draws {
				for range n {
					draws[k] = append(draws[k], kernels.Window{Row: rng.Int64N(lay.steps / capacity), Start: rng.Int64N(1 << 40), Len: 1})
				}
			}
			reps := max(1, 4096/n)
			var ts [4][]float64
			var r1, r2, r3 []float64
			k := 0
			for range 31 {
				var d [4]float64
				for which := range 4 {
					gatherPrefetch = which >= 2
					t0 := time.Now()
					for range reps {
						k = (k + 1) % len(draws)
						switch which {
						case 0:
							oldGatherWindows(cols, draws[k], 1, capacity, mask, 0, 0, n)
						case 3: // split over the workers above parallelBytes
							if err := be.GatherWindows(cols, draws[k], 1, capacity, mask, 0); err != nil {
								t.Fatal(err)
							}
						default:
							gatherWindows(cols, draws[k], 1, capacity, mask, 0, 0, n)
						}
					}
					d[which] = float64(time.Since(t0)) / float64(reps)
					ts[which] = append(ts[which], d[which])
				}
				r1, r2, r3 = append(r1, d[0]/d[1]), append(r2, d[0]/d[2]), append(r3, d[2]/d[3])
			}
			gatherPrefetch = true
			for _, s := range [][]float64{ts[0], ts[1], ts[2], ts[3], r1, r2, r3} {
				slices.Sort(s)
			}
			t.Logf("%s B=%d: old %.1f µs, chunked %.1f µs, chunked+prefetch %.1f µs, Backend.GatherWindows %.1f µs (medians); old over chunked %.2f, over chunked+prefetch %.2f; one goroutine over Backend (split above %d bytes) %.2f (median ratios)",
				lay.name, n, ts[0][15]/1e3, ts[1][15]/1e3, ts[2][15]/1e3, ts[3][15]/1e3, r1[15], r2[15], parallelBytes, r3[15])
		}
		for _, c := range cols {
			be.Free(c.Ring)
			be.Free(c.Out)
		}
		be.Free(mask)
	}
}
