//go:build trajring_cuda

package gpu

import (
	"bytes"
	"testing"

	"gorgonia.org/tensor"
)

// TestCountsSyncsAndCopies: Syncs counts each host wait the backend
// issues and CopiesToHost each queued device-to-host copy, whatever its
// size; launches, uploads and HostInto/TensorInto wait for nothing, and
// TensorInto copies a device tensor's bytes into pinned memory, there
// after the next Download's wait.
func TestCountsSyncsAndCopies(t *testing.T) {
	b := newBackend(t)
	a, err := b.Alloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 1024)
	for i := range src {
		src[i] = byte(i * 7)
	}
	s0, c0, by0 := b.Syncs(), b.CopiesToHost(), b.BytesToHost()
	if err := b.Upload(a, 0, src); err != nil {
		t.Fatal(err)
	}
	if got := b.Syncs() - s0; got != 0 {
		t.Fatalf("an upload counted %d syncs", got)
	}
	pinned, err := b.AllocPinned(256)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.FreePinned(pinned); err != nil {
			t.Error(err)
		}
	}()
	view, err := b.Tensor(a, 512, tensor.Uint8, 256)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.TensorInto(pinned[:100], view); err != nil {
		t.Fatal(err)
	}
	if err := b.HostInto(pinned[100:], a, 0); err != nil {
		t.Fatal(err)
	}
	if s, c := b.Syncs()-s0, b.CopiesToHost()-c0; s != 0 || c != 2 {
		t.Fatalf("TensorInto and HostInto: %d syncs, %d copies; want 0 and 2", s, c)
	}
	one := make([]byte, 1)
	if err := b.Download(one, a, 3); err != nil {
		t.Fatal(err)
	}
	if s, c, n := b.Syncs()-s0, b.CopiesToHost()-c0, b.BytesToHost()-by0; s != 1 || c != 3 || n != 100+156+1 {
		t.Fatalf("after a Download: %d syncs, %d copies, %d bytes; want 1, 3 and 257", s, c, n)
	}
	if !bytes.Equal(pinned[:100], src[512:612]) || !bytes.Equal(pinned[100:], src[:156]) || one[0] != src[3] {
		t.Fatal("TensorInto, HostInto or Download copied the wrong bytes")
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if s := b.Syncs() - s0; s != 2 {
		t.Fatalf("after Sync: %d syncs, want 2", s)
	}
	ev, err := b.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if err := b.Record(ev); err != nil {
		t.Fatal(err)
	}
	if err := ev.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if s := b.Syncs() - s0; s != 3 {
		t.Fatalf("after Event.Synchronize: %d syncs, want 3", s)
	}
	// A tensor of another arena's memory, or past its end, is refused.
	if err := b.TensorInto(make([]byte, 300), view); err == nil {
		t.Fatal("TensorInto of 300 bytes from a 256-byte tensor succeeded")
	}
	if err := b.Free(a); err != nil {
		t.Fatal(err)
	}
	if s := b.Syncs() - s0; s != 4 {
		t.Fatalf("after Free: %d syncs, want 4", s)
	}
}
