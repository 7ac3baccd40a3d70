//go:build trajring_cuda

package gpu

import "testing"

// TestBytesToHostCountsCopies checks that BytesToHost grows by exactly
// the bytes of each device-to-host copy (Download and HostInto), and by
// nothing for uploads, device copies, failed copies and empty ones.
func TestBytesToHostCountsCopies(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Skip(err)
	}
	defer b.Close()
	a, err := b.Alloc(256)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Alloc(256)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := b.AllocPinned(64)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   func() error
		fail bool
		want int64
	}{
		{"upload", func() error { return b.Upload(a, 0, make([]byte, 100)) }, false, 0},
		{"device copy", func() error { return b.Copy(c, 0, a, 0, 128) }, false, 0},
		{"download 100", func() error { return b.Download(make([]byte, 100), a, 8) }, false, 100},
		{"download 0", func() error { return b.Download(nil, a, 0) }, false, 0},
		{"download out of bounds", func() error { return b.Download(make([]byte, 300), a, 0) }, true, 0},
		{"host into 64", func() error { return b.HostInto(pinned, c, 0) }, false, 64},
		{"host into unpinned", func() error { return b.HostInto(make([]byte, 8), c, 0) }, true, 0},
	} {
		before := b.BytesToHost()
		err := tc.op()
		if (err != nil) != tc.fail {
			t.Fatalf("%s: error %v, want failure %v", tc.name, err, tc.fail)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := b.BytesToHost() - before; got != tc.want {
			t.Errorf("%s: BytesToHost grew by %d, want %d", tc.name, got, tc.want)
		}
	}
}
