//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
)

// TestDroppedDeviceResultsAreFreed: device batches dropped without
// Release give their device memory back once unreachable (the owner rides
// on the tensors' DeviceEngine), while a kept tensor keeps its batch's
// memory and its device engine.
func TestDroppedDeviceResultsAreFreed(t *testing.T) {
	g := gpuBackend(t)
	_, _, tbl := sourceTable(t, g)
	free := func() int64 {
		n, err := g.MemAvailable()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Samples first, as many as the backend has staging slots and more:
	// it keeps the staging it grows for the index lists of a large sample
	// (one slot per call, used in turn), and that is not result memory.
	for range 32 {
		warm, err := tbl.Sample(context.Background(), 8192)
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Release(); err != nil {
			t.Fatal(err)
		}
	}
	base := free()
	held := make([]*tensorbuf.Batch, 20) // reachable until measured
	for i := range held {
		// 8192 items of 8 float32 plus the built-in columns: about 0.5 MiB each.
		bt, err := tbl.Sample(context.Background(), 8192)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = bt
	}
	used := func() int64 { return base - free() }
	all := used()
	per := all / 20
	if per < 8192*32 {
		t.Fatalf("20 batches hold %d bytes of device memory: the test does not measure what it means to", all)
	}
	obs := held[0].Fields["obs"] // kept; its batch is dropped
	clear(held)
	// The 19 batches nobody holds come back (less a batch's worth of
	// slack: the backend keeps the staging it grew for their index lists);
	// the kept tensor's stays.
	after := collect(all-19*per, used)
	if after > all-18*per {
		t.Fatalf("dropped device batches: %d of %d bytes still held after GC", after, all)
	}
	if !gpu.IsDevice(obs) || obs.IsNativelyAccessible() {
		t.Fatal("a kept device tensor lost its device engine")
	}
	if after < per {
		t.Fatalf("the kept tensor's batch was freed under it (%d bytes held, a batch is %d)", after, per)
	}
	runtime.KeepAlive(obs)
	if got := collect(after-per, used); got > after-per*9/10 {
		t.Fatalf("the last batch is still held (%d bytes, %d before its tensor was dropped)", got, after)
	}
}
