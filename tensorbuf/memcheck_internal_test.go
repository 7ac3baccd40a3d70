package tensorbuf

import (
	"errors"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// fakeDevice is a backend whose arenas count as device memory, with an
// injected free-memory figure.
type fakeDevice struct {
	*cpu.Backend
	avail  int64
	err    error
	allocs int
}

func (f *fakeDevice) Name() string                 { return "fake" }
func (f *fakeDevice) MemAvailable() (int64, error) { return f.avail, f.err }
func (f *fakeDevice) ArenasInHostMemory() bool     { return false }
func (f *fakeDevice) Alloc(n int64) (Arena, error) {
	f.allocs++
	return f.Backend.Alloc(n)
}

// TestNewMemoryAvailable: a buffer larger than the memory available is
// refused with ErrConfig naming the bytes asked and available, before
// anything is allocated; one that fits exactly is created.
func TestNewMemoryAvailable(t *testing.T) {
	// 2 rows x 8 steps of 28 bytes (obs 12 + step_type, next_step_type,
	// reward, discount 4 each) in one packed record of 32 bytes (28
	// rounded up to 16, 14% padding): 512 bytes of arenas; metadata 16
	// bytes of step mirror + 2 rows x 16 bytes = 48.
	fields := []Field{{Name: "obs", DType: Float32, Shape: []int{3}}}
	const prefix = "tensorbuf: invalid configuration: 2 rows of 8 steps of 28 bytes: "
	unread := errors.New("unreadable")
	for _, tc := range []struct {
		name      string
		device    bool // a fakeDevice instead of the cpu backend
		devAvail  int64
		devErr    error
		hostAvail int64
		hostErr   error
		want      string // "" for success
	}{
		{name: "cpu fits exactly", hostAvail: 560},
		{name: "cpu one byte short", hostAvail: 559,
			want: prefix + "the buffer needs 560 bytes of host memory (512 of arenas, 48 of metadata) but 559 bytes are available"},
		{name: "cpu, host figure unreadable", hostAvail: 0, hostErr: unread},
		{name: "device fits exactly", device: true, devAvail: 512, hostAvail: 48},
		{name: "device one byte short", device: true, devAvail: 511, hostAvail: 1 << 40,
			want: prefix + "the arenas need 512 bytes of fake backend memory but 511 bytes are available"},
		{name: "device, host metadata short", device: true, devAvail: 1 << 40, hostAvail: 47,
			want: prefix + "the metadata needs 48 bytes of host memory but 47 bytes are available"},
		{name: "device, figures unreadable", device: true, devErr: unread, hostErr: unread},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var be Backend = cpu.New()
			dev := &fakeDevice{Backend: cpu.New(), avail: tc.devAvail, err: tc.devErr}
			if tc.device {
				be = dev
			}
			hostMem := func() (int64, error) { return tc.hostAvail, tc.hostErr }
			b, err := newBuffer(Config{NumEnvs: 2, Capacity: 8, Fields: fields, Backend: be}, hostMem)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("newBuffer: %v", err)
				}
				if got := b.MemoryBytes(); got != 512+16 {
					t.Fatalf("MemoryBytes = %d, want 528", got)
				}
				b.Close()
				return
			}
			if !errors.Is(err, ErrConfig) || err.Error() != tc.want {
				t.Fatalf("newBuffer error:\n got %v\nwant %s", err, tc.want)
			}
			if b != nil || dev.allocs != 0 {
				t.Fatalf("refused buffer %v allocated %d arenas", b, dev.allocs)
			}
		})
	}
}
