//go:build trajring_cuda

package gpu

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/trajring/trajring/kernels"
)

// TestColumnCacheEvictionIsSteady: gathers into more sets of columns than
// the descriptor cache holds evict an entry on every call, and in the
// steady state that neither allocates nor frees device or pinned memory
// nor syncs the stream (each would make a real driver serialise every
// stream of the context): an evicted block is rewritten in stream order.
// The gathers land where they should. (Event syncs are not counted: the
// stand-in runs queued work only when something waits, so reusing a
// staging slot waits on it, where a GPU has long finished.)
func TestColumnCacheEvictionIsSteady(t *testing.T) {
	const step, capacity, rows = 16, 4, 2
	if _, ok := CurrentStandinCounts(); !ok {
		t.Skip("needs the stand-in driver's call counts")
	}
	b := newBackend(t)
	ringData := make([]byte, rows*capacity*step)
	for i := range ringData {
		ringData[i] = byte(i)
	}
	ring := mustArena(t, b, ringData)
	wins, err := b.Alloc(kernels.WinDescSize)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]kernels.Arena, colCacheSize+2)
	for i := range outs {
		if outs[i], err = b.Alloc(step); err != nil {
			t.Fatal(err)
		}
	}
	var before StandinCounts
	const warm, rounds = 2, 5
	for r := range rounds {
		if r == warm {
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			before, _ = CurrentStandinCounts()
		}
		w := binary.LittleEndian.AppendUint64(nil, 1) // row 1
		w = binary.LittleEndian.AppendUint64(w, uint64(r%capacity))
		w = binary.LittleEndian.AppendUint64(w, 1)
		if err := b.Upload(wins, 0, w); err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if err := b.GatherWindowsAt([]kernels.Column{{Ring: ring, Out: o, StepBytes: step}}, wins, 0, 1, 1, capacity, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	after, _ := CurrentStandinCounts()
	got := StandinCounts{Allocs: after.Allocs - before.Allocs, Frees: after.Frees - before.Frees,
		HostAllocs: after.HostAllocs - before.HostAllocs, HostFrees: after.HostFrees - before.HostFrees,
		StreamSyncs: after.StreamSyncs - before.StreamSyncs, CtxSyncs: after.CtxSyncs - before.CtxSyncs}
	if got != (StandinCounts{}) {
		t.Errorf("%d rounds of %d evicting gathers: %+v, want none", rounds-warm, len(outs), got)
	}
	last := (capacity + (rounds-1)%capacity) * step // row 1, the last round's slot
	for i, o := range outs {
		buf := make([]byte, step)
		if err := b.Download(buf, o, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, ringData[last:last+step]) {
			t.Errorf("output %d: % x, want % x", i, buf, ringData[last:last+step])
		}
	}
}

// TestStagingKeepsItsSizeInASteadyState: a staging slot that a large
// launch comes back to every other use keeps its size instead of being
// freed and allocated again each time (pinned and device memory, each a
// serialisation of the context on a real driver); one that has served
// only small launches for shrinkAfter uses in a row is given back, once.
func TestStagingKeepsItsSizeInASteadyState(t *testing.T) {
	const step, big = 16, 64 << 10 // a big gather stages 512 KiB of indices
	if _, ok := CurrentStandinCounts(); !ok {
		t.Skip("needs the stand-in driver's call counts")
	}
	prev := shrinkAbove
	shrinkAbove = 256 << 10
	defer func() { shrinkAbove = prev }()
	b := newBackend(t)
	ring := mustArena(t, b, make([]byte, 4*step))
	out, err := b.Alloc(big * step)
	if err != nil {
		t.Fatal(err)
	}
	cols := []kernels.Column{{Ring: ring, Out: out, StepBytes: step}}
	bigIdx, smallIdx := make([]int64, big), []int64{1}
	// With bigEvery 32 one slot of the 16 alternates big and small.
	gather := func(calls int, bigEvery int) {
		t.Helper()
		for k := range calls {
			idx := smallIdx
			if bigEvery > 0 && k%bigEvery == 0 {
				idx = bigIdx
			}
			if err := b.GatherRows(cols, idx); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func() StandinCounts { c, _ := CurrentStandinCounts(); return c }
	delta := func(a, c StandinCounts) [4]uint64 {
		return [4]uint64{c.Allocs - a.Allocs, c.Frees - a.Frees, c.HostAllocs - a.HostAllocs, c.HostFrees - a.HostFrees}
	}
	gather(64, 32) // warm: every slot allocated, slot 0 grown
	c0 := count()
	gather(4*32, 32)
	if got := delta(c0, count()); got != [4]uint64{} {
		t.Errorf("steady state of big and small gathers: allocs, frees, pinned allocs, pinned frees %v, want none", got)
	}
	c1 := count()
	gather(shrinkAfter*stagingSlots, 0) // only small ones: the big slot shrinks once
	if got := delta(c1, count()); got != [4]uint64{1, 1, 1, 1} {
		t.Errorf("%d small gathers after big ones: allocs, frees, pinned allocs, pinned frees %v, want one each (the big slot shrinks)", shrinkAfter*stagingSlots, got)
	}
}
