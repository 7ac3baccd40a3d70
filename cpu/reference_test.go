package cpu_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
)

// TestGathersMatchReference runs GatherWindows, GatherRows and Concat
// over random packed records (fields of 1 to 150 bytes at any offset of a
// shared ring, plus a column on its own ring), windows of 1 to 5 steps
// with any number of real steps, and unaligned output offsets, against
// the loops their doc comments spell out, with guard bytes before and
// after every output run. Every fourth trial has only full windows of 2
// to 5 steps and fields of 4 to 128 bytes: the row gather of window steps
// (wrapping at a row's end) that gatherWindows takes for them. In every
// third of the others one or two fields have 256 to 3,300 bytes: the row
// gathers that prefetch whole records rows ahead (aheadMin).
func TestGathersMatchReference(t *testing.T) {
	be := cpu.New()
	rng := rand.New(rand.NewPCG(3, 4))
	const guard = 37
	for trial := range 200 {
		allFull := trial%4 == 1
		sizes := make([]int64, 1+rng.IntN(6))
		var stride int64
		for i := range sizes {
			sizes[i] = 1 + rng.Int64N(150)
			if rng.IntN(2) == 0 {
				sizes[i] = []int64{1, 4, 8, 12, 16, 24, 32, 68, 128}[rng.IntN(9)]
			}
			if allFull {
				sizes[i] = 4 + rng.Int64N(125)
			} else if trial%3 == 2 && (i == 0 || rng.IntN(4) == 0) {
				sizes[i] = 256 + rng.Int64N(3045)
			}
			stride += sizes[i]
		}
		stride += rng.Int64N(9) // padding at the record's end
		rows, capacity := 1+rng.Int64N(4), 1+rng.Int64N(40)
		if allFull {
			capacity = max(capacity, 5) // the longest window
		}
		steps := rows * capacity
		packed := arena(t, be, steps*stride)
		fillRandom(rng, packed.Bytes())
		own := arena(t, be, steps*sizes[0])
		fillRandom(rng, own.Bytes())

		seqLen := 1 + rng.Int64N(5)
		if trial%2 == 0 {
			seqLen = 1
		}
		if allFull {
			seqLen = 2 + rng.Int64N(4)
		}
		seqLen = min(seqLen, capacity)
		n := 1 + rng.IntN(70)
		wins := make([]kernels.Window, n)
		for i := range wins {
			w := kernels.Window{Row: rng.Int64N(rows), Start: rng.Int64N(3 * capacity), Len: seqLen}
			if rng.IntN(4) == 0 && !allFull {
				w.Len = rng.Int64N(seqLen + 1)
			}
			wins[i] = w
		}
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = rng.Int64N(steps)
		}

		var cols []kernels.Column
		var off int64
		for i, s := range sizes {
			col := kernels.Column{Ring: packed, StepBytes: s, Stride: stride, Offset: off}
			off += s
			if i == 0 && trial%3 == 0 {
				col = kernels.Column{Ring: own, StepBytes: s}
			}
			if rng.IntN(2) == 0 {
				col.Pad = make([]byte, s)
				fillRandom(rng, col.Pad)
			}
			cols = append(cols, col)
		}
		next := make([]int64, n)
		for i := range next {
			next[i] = rng.Int64N(steps)
		}
		steps1 := int64(n) * seqLen
		for which, name := range []string{"windows", "rows", "concat"} {
			var got, want [][]byte
			for c := range cols {
				s := cols[c].StepBytes
				outOff := guard + rng.Int64N(16)
				o := arena(t, be, outOff+steps1*s+guard)
				fillRandom(rng, o.Bytes())
				cols[c].Out, cols[c].OutOff = o, outOff
				got = append(got, o.Bytes())
				want = append(want, bytes.Clone(o.Bytes()))
				cols[c].NextOut, cols[c].NextOff = nil, 0
			}
			var nextCols []kernels.Column // the columns with successors, Out = NextOut
			if which == 2 {
				for c := range cols {
					if c%2 == 1 && c != len(cols)-1 {
						continue // some columns need no successor
					}
					s := cols[c].StepBytes
					outOff := guard + rng.Int64N(16)
					o := arena(t, be, outOff+int64(n)*s+guard)
					fillRandom(rng, o.Bytes())
					cols[c].NextOut, cols[c].NextOff = o, outOff
					nc := cols[c]
					nc.Out, nc.OutOff = o, outOff
					nextCols = append(nextCols, nc)
					got = append(got, o.Bytes())
					want = append(want, bytes.Clone(o.Bytes()))
				}
			}
			mask := arena(t, be, 2*guard+steps1)
			fillRandom(rng, mask.Bytes())
			wantMask := bytes.Clone(mask.Bytes())
			var err error
			switch which {
			case 0:
				err = be.GatherWindows(cols, wins, seqLen, capacity, mask, guard)
				refWindows(cols, want, wins, seqLen, capacity, wantMask, guard)
			case 1:
				err = be.GatherRows(cols, idx)
				refRows(cols, want, idx)
			case 2:
				err = be.Concat(cols, idx, next)
				refRows(cols, want, idx)
				refRows(nextCols, want[len(cols):], next)
			}
			if err != nil {
				t.Fatalf("trial %d %s: %v", trial, name, err)
			}
			for c := range got {
				if !bytes.Equal(got[c], want[c]) {
					all := append(slices.Clone(cols), nextCols...)
					t.Fatalf("trial %d %s: output %d (%d bytes, stride %d, offset %d) differs from the reference", trial, name, c, all[c].StepBytes, all[c].RingStride(), all[c].Offset)
				}
			}
			if which == 0 && !bytes.Equal(mask.Bytes(), wantMask) {
				t.Fatalf("trial %d: mask differs from the reference", trial)
			}
		}
	}
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// ringOf returns the bytes of a column's ring.
func ringOf(col *kernels.Column) []byte { return col.Ring.(*cpu.Arena).Bytes() }

// refWindows is GatherWindows' documented loop, into out[c].
func refWindows(cols []kernels.Column, out [][]byte, wins []kernels.Window, seqLen, capacity int64, mask []byte, maskOff int64) {
	for c := range cols {
		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
		ring, pad := ringOf(&cols[c]), cols[c].Pad
		if pad == nil {
			pad = make([]byte, s)
		}
		for b, w := range wins {
			for t := range seqLen {
				j := cols[c].OutOff + (int64(b)*seqLen+t)*s
				if t < w.Len {
					ix := w.Row*capacity + (w.Start+t)%capacity
					copy(out[c][j:j+s], ring[ix*r+o:ix*r+o+s])
				} else {
					copy(out[c][j:j+s], pad)
				}
			}
		}
	}
	for b, w := range wins {
		for t := range seqLen {
			mask[maskOff+int64(b)*seqLen+t] = 0
			if t < w.Len {
				mask[maskOff+int64(b)*seqLen+t] = 1
			}
		}
	}
}

// refRows is GatherRows' documented loop, into out[c].
func refRows(cols []kernels.Column, out [][]byte, idx []int64) {
	for c := range cols {
		s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
		ring := ringOf(&cols[c])
		for i, ix := range idx {
			j := cols[c].OutOff + int64(i)*s
			copy(out[c][j:j+s], ring[ix*r+o:ix*r+o+s])
		}
	}
}
