//go:build cuda

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
