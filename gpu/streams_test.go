//go:build trajring_cuda

package gpu

import (
	"bytes"
	"runtime"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// streamEnv is the memory and the streams a stream-ordering case works
// on: src holds 0xAB, buf starts as 0x00, host (pageable) holds 0xCD, and
// pin (pinned host memory the cases copy into) starts as 0xEE.
type streamEnv struct {
	src, buf cu.DevicePtr
	host     []byte
	pin      []byte
	nb       cu.Stream // non-blocking
	bl       cu.Stream // blocking: ordered with the legacy NULL stream
	ev       cu.Event
}

const streamBytes = 16

// toPin copies src (or buf) into pin[off:off+8] on stream s.
func (e *streamEnv) toPin(off int, p cu.DevicePtr, s cu.Stream) error {
	return cu.MemcpyDtoHAsync(unsafe.Pointer(&e.pin[off]), p, 8, s)
}

// TestStreamOrderingModel checks, through the driver API, the orderings
// a program may rely on: stream order, cuStreamWaitEvent, the legacy
// NULL stream's implicit ordering with blocking streams, what a stream or
// event sync and the synchronous copies wait for. The cases marked race
// are negative controls: a missing wait or sync, whose outcome on a GPU
// depends on timing, and which the stand-in resolves against the program
// (so they run only there): a consumer on the NULL stream that does not
// wait for a non-blocking producer, a read after a sync of the wrong
// stream or of an event recorded before the copy, and a kernel-side read
// right after a synchronous upload from pageable memory.
func TestStreamOrderingModel(t *testing.T) {
	const (
		ab, cd, ee, zero = 0xAB, 0xCD, 0xEE, 0x00
	)
	cases := []struct {
		name string
		race bool
		run  func(e *streamEnv) error
		want [2]byte // pin[0] and pin[8] when run returns
	}{
		{"NULL consumer waits for a non-blocking producer", false, func(e *streamEnv) error {
			return all(cu.MemcpyDtoDAsync(e.buf, e.src, streamBytes, e.nb), e.ev.Record(e.nb),
				cu.NoStream.Wait(e.ev, 0), e.toPin(0, e.buf, cu.NoStream), cu.Synchronize())
		}, [2]byte{ab, ee}},
		{"NULL consumer without the wait", true, func(e *streamEnv) error {
			return all(cu.MemcpyDtoDAsync(e.buf, e.src, streamBytes, e.nb), e.ev.Record(e.nb),
				e.toPin(0, e.buf, cu.NoStream), cu.Synchronize())
		}, [2]byte{zero, ee}},
		{"NULL consumer after a blocking producer", false, func(e *streamEnv) error {
			return all(cu.MemcpyDtoDAsync(e.buf, e.src, streamBytes, e.bl), e.toPin(0, e.buf, cu.NoStream), cu.Synchronize())
		}, [2]byte{ab, ee}},
		{"blocking consumer after a NULL producer", false, func(e *streamEnv) error {
			return all(cu.MemcpyDtoDAsync(e.buf, e.src, streamBytes, cu.NoStream), e.toPin(0, e.buf, e.bl), cu.Synchronize())
		}, [2]byte{ab, ee}},
		{"non-blocking consumer after a NULL producer", true, func(e *streamEnv) error {
			return all(cu.MemcpyDtoDAsync(e.buf, e.src, streamBytes, cu.NoStream), e.toPin(0, e.buf, e.nb), cu.Synchronize())
		}, [2]byte{zero, ee}},
		{"sync of the copy's stream", false, func(e *streamEnv) error {
			return all(e.toPin(0, e.src, e.nb), e.nb.Synchronize())
		}, [2]byte{ab, ee}},
		{"sync of another stream", true, func(e *streamEnv) error {
			return all(e.toPin(0, e.src, e.nb), e.bl.Synchronize())
		}, [2]byte{ee, ee}},
		{"NULL stream sync waits for blocking streams", false, func(e *streamEnv) error {
			return all(e.toPin(0, e.src, e.bl), cu.NoStream.Synchronize())
		}, [2]byte{ab, ee}},
		{"NULL stream sync and a non-blocking stream", true, func(e *streamEnv) error {
			return all(e.toPin(0, e.src, e.nb), cu.NoStream.Synchronize())
		}, [2]byte{ee, ee}},
		{"event sync waits for the work before the record only", true, func(e *streamEnv) error {
			return all(e.toPin(0, e.src, e.nb), e.ev.Record(e.nb), e.toPin(8, e.src, e.nb), e.ev.Synchronize())
		}, [2]byte{ab, ee}},
		{"synchronous DtoH waits for the NULL stream", false, func(e *streamEnv) error {
			got := make([]byte, streamBytes)
			err := all(cu.MemcpyDtoDAsync(e.buf, e.src, streamBytes, cu.NoStream), cu.MemcpyDtoH(unsafe.Pointer(&got[0]), e.buf, streamBytes))
			e.pin[0], e.pin[8] = got[0], got[8] // pageable: done on return
			return err
		}, [2]byte{ab, ab}},
		{"pageable upload, then a non-blocking stream that waits for it", false, func(e *streamEnv) error {
			err := all(cu.MemcpyHtoD(e.buf, unsafe.Pointer(&e.host[0]), streamBytes), e.ev.Record(cu.NoStream),
				e.nb.Wait(e.ev, 0), e.toPin(0, e.buf, e.nb))
			e.host[0] = 0x11 // the driver staged it: reusable at once
			return all(err, e.nb.Synchronize())
		}, [2]byte{cd, ee}},
		{"pageable upload, then a non-blocking stream without the wait", true, func(e *streamEnv) error {
			return all(cu.MemcpyHtoD(e.buf, unsafe.Pointer(&e.host[0]), streamBytes), e.toPin(0, e.buf, e.nb), e.nb.Synchronize())
		}, [2]byte{zero, ee}},
		{"pageable async upload on the stream", false, func(e *streamEnv) error {
			err := all(cu.MemcpyHtoDAsync(e.buf, unsafe.Pointer(&e.host[0]), streamBytes, e.nb), e.toPin(0, e.buf, e.nb))
			e.host[0] = 0x11 // the driver staged it: reusable at once
			return all(err, e.nb.Synchronize())
		}, [2]byte{cd, ee}},
	}
	_, standin := StandinDeviceTime()
	b := newBackend(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(drv.ctx); err != nil {
		t.Fatal(err)
	}
	e := &streamEnv{host: bytes.Repeat([]byte{cd}, streamBytes)}
	var err error
	if e.pin, err = b.AllocPinned(streamBytes); err != nil {
		t.Fatal(err)
	}
	defer b.FreePinned(e.pin)
	for _, p := range []*cu.DevicePtr{&e.src, &e.buf} {
		if *p, err = cu.MemAlloc(streamBytes); err != nil {
			t.Fatal(err)
		}
		defer cu.MemFree(*p)
	}
	if e.nb, err = cu.MakeStream(cu.NonBlocking); err != nil {
		t.Fatal(err)
	}
	defer e.nb.Destroy()
	if e.bl, err = cu.MakeStream(cu.DefaultStream); err != nil {
		t.Fatal(err)
	}
	defer e.bl.Destroy()
	if e.ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		t.Fatal(err)
	}
	defer cu.DestroyEvent(&e.ev)
	src := bytes.Repeat([]byte{ab}, streamBytes)
	for _, c := range cases {
		if c.race && !standin {
			continue // on a GPU the race may go either way
		}
		if err := all(cu.MemcpyHtoD(e.src, unsafe.Pointer(&src[0]), streamBytes), cu.MemsetD8(e.buf, zero, streamBytes), cu.Synchronize()); err != nil {
			t.Fatalf("%s: setup: %v", c.name, err)
		}
		for i := range e.pin {
			e.pin[i] = ee
		}
		for i := range e.host {
			e.host[i] = cd
		}
		if err := c.run(e); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := [2]byte{e.pin[0], e.pin[8]}; got != c.want {
			t.Errorf("%s: read % x, want % x", c.name, got, c.want)
		}
		if err := cu.Synchronize(); err != nil { // what the case left behind
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// all returns the first non-nil error.
func all(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestUploadIsStreamOrdered: an Upload, staged (up to 16 MiB) or large,
// is copied before the kernel queued after it reads the arena, and its
// source may be overwritten as soon as Upload returns. A large upload
// once went by a synchronous copy on the legacy stream, which the
// backend's non-blocking stream does not wait for: the stand-in then ran
// the gather first and it read the arena's zeros.
func TestUploadIsStreamOrdered(t *testing.T) {
	const step = 16
	for _, size := range []int64{4096, maxStagedUpload, maxStagedUpload + 4096} {
		b := newBackend(t)
		ring, err := b.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.Alloc(3 * step)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Sync(); err != nil { // the arenas' zeroing is done
			t.Fatal(err)
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i/step*7 + i%step)
		}
		if err := b.Upload(ring, 0, data); err != nil {
			t.Fatal(err)
		}
		idx := []int64{0, size/step/2 + 1, size/step - 1}
		var want []byte
		for _, ix := range idx {
			want = append(want, data[ix*step:(ix+1)*step]...)
		}
		clear(data) // Upload's source is free once it returns
		if err := b.GatherRows([]kernels.Column{{Ring: ring, Out: out, StepBytes: step}}, idx); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if err := b.Download(got, out, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("upload of %d bytes: the gather after it read % x..., want % x...", size, got[:8], want[:8])
		}
	}
}
