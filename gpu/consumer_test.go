//go:build trajring_cuda

package gpu

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// streamOf returns the cu.Stream of a raw CUstream value (1 is
// CU_STREAM_LEGACY).
func streamOf(h uintptr) cu.Stream { return *(*cu.Stream)(unsafe.Pointer(&h)) }

// TestHandOffOrdersConsumerStream checks the DLPack stream protocol on the
// stand-in, which runs queued work only when something needs it: after
// HandOff(s), waiting for work recorded on s runs the backend's gather
// queued before it; without HandOff it does not. AfterConsumer orders the
// other way: the backend's later work waits for the consumer's.
func TestHandOffOrdersConsumerStream(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, handOff := range []bool{false, true} {
		b := newBackend(t)
		if err := cu.SetCurrentContext(drv.ctx); err != nil {
			t.Fatal(err)
		}
		ring, err := b.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.Alloc(16)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := b.GatherRows([]kernels.Column{{Ring: ring, Out: out, StepBytes: 16}}, []int64{2}); err != nil {
			t.Fatal(err)
		}
		mark, err := b.NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Record(mark); err != nil {
			t.Fatal(err)
		}
		if handOff {
			if err := b.HandOff(1); err != nil {
				t.Fatal(err)
			}
		}
		consumer, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			t.Fatal(err)
		}
		if err := consumer.Record(streamOf(1)); err != nil {
			t.Fatal(err)
		}
		if err := consumer.Synchronize(); err != nil {
			t.Fatal(err)
		}
		done, err := mark.Done()
		if err != nil {
			t.Fatal(err)
		}
		if done != handOff {
			t.Errorf("handOff %v: the backend's gather had run when the consumer's stream reached its event: %v", handOff, done)
		}
		if err := b.AfterConsumer(1); err != nil {
			t.Fatal(err)
		}
		if err := b.HandOff(0); err == nil {
			t.Error("HandOff(0): no error; DLPack forbids stream 0")
		}
		_ = cu.DestroyEvent(&consumer)
		_ = mark.Close()
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}
