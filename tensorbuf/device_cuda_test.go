//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/cu"
)

func gpuBackend(t *testing.T) *gpu.Backend {
	t.Helper()
	g, err := gpu.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestDeviceBatchIsRefusedByAddAndPrintsSafely: a batch sampled on the
// gpu backend holds device tensors; feeding one to Writer.Add of a buffer
// on another backend fails with ErrForeignTensor (an ErrDeviceTensor) and
// writes nothing (the buffer's own backend's tensors are added in place:
// writer_device_cuda_test.go), and printing the batch prints shapes and
// dtypes (the stand-in would kill the process on a data read).
func TestDeviceBatchIsRefusedByAddAndPrintsSafely(t *testing.T) {
	buf, w, _ := sourceTable(t, gpuBackend(t))
	_, _, tbl := sourceTable(t, gpuBackend(t))
	bt, err := tbl.Sample(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	if !gpu.IsDevice(bt.Fields["obs"]) {
		t.Fatal("batch tensor is not a device tensor")
	}
	if s := fmt.Sprintf("%+v", bt); !strings.Contains(s, "obs: float32[4 1 8]") {
		t.Fatalf("printed batch: %s", s)
	}
	before := []int64{buf.Cursor(0), buf.Cursor(1), buf.Cursor(2), buf.Cursor(3), buf.Size()}
	step := fullStep(hostTimeFields["low-dim"], 4)
	step.Values["obs"] = bt.Fields["obs"]
	step.Values["obs"].Reshape(4, 8)
	if err := w.Add(step); !errors.Is(err, tensorbuf.ErrForeignTensor) || !errors.Is(err, tensorbuf.ErrDeviceTensor) || !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("Add of a device tensor: %v, want ErrDeviceTensor", err)
	}
	if after := []int64{buf.Cursor(0), buf.Cursor(1), buf.Cursor(2), buf.Cursor(3), buf.Size()}; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused Add changed the buffer: %v -> %v", before, after)
	}
}

// TestBatchSourceOrdersAGPUConsumer: a learner on its own stream copies
// each batch after waiting for its ready event and hands it back with a
// done event; the source (one deep, so every Next reuses the batch) waits
// for it on the device. Every copy holds the batch it was given.
func TestBatchSourceOrdersAGPUConsumer(t *testing.T) {
	g := gpuBackend(t)
	_, _, tbl := sourceTable(t, g)
	src, err := tensorbuf.NewBatchSource(tbl, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// The consumer uses the driver API on its own locked thread, in the
	// primary context (cudart-based code is in it already).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := cu.GetDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	pctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		t.Fatal(err)
	}
	defer dev.ReleasePrimaryCtx()
	if err := cu.SetCurrentContext(pctx); err != nil {
		t.Fatal(err)
	}
	const rounds = 4
	seen := make([]kernels.Arena, rounds)
	for i := range seen {
		if seen[i], err = g.Alloc(4 * 8 * 4); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	cs, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Destroy()
	done, err := cu.MakeEvent(cu.DisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	defer cu.DestroyEvent(&done)
	items := make([][]tensorbuf.Item, rounds)
	for i := range rounds {
		bt, ready, err := src.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		items[i] = append([]tensorbuf.Item(nil), bt.Items...)
		if err := cs.Wait(eventOf(ready), 0); err != nil {
			t.Fatal(err)
		}
		obs := bt.Fields["obs"]
		if err := cu.MemcpyDtoDAsync(seen[i].(*gpu.Arena).Ptr(), cu.DevicePtr(obs.Uintptr()), int64(obs.MemSize()), cs); err != nil {
			t.Fatal(err)
		}
		if err := done.Record(cs); err != nil {
			t.Fatal(err)
		}
		if err := src.Done(bt, handleOf(done)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Synchronize(); err != nil { // the consumer's last copies: nothing else waits for them
		t.Fatal(err)
	}
	for i := range rounds {
		got := make([]byte, 4*8*4)
		if err := g.Download(got, seen[i], 0); err != nil {
			t.Fatal(err)
		}
		for j, it := range items[i] {
			v := f32At(got, j*8)
			if want := float32(it.Row*1000 + int(it.Start)); v != want {
				t.Fatalf("round %d item %d (%+v): consumer saw %v, want %v", i, j, it, v, want)
			}
		}
	}
}

func eventOf(e tensorbuf.Event) cu.Event {
	h := e.Handle()
	return *(*cu.Event)(unsafe.Pointer(&h))
}

func handleOf(e cu.Event) uintptr { return *(*uintptr)(unsafe.Pointer(&e)) }

func f32At(b []byte, k int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:])) }
