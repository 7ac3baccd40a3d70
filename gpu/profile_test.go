//go:build trajring_cuda

package gpu

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
)

// TestMisalignedOperandsAreRefused: a learner kernel's operand whose
// device address is not a multiple of its element size is refused with
// ErrBounds before anything is launched (on a GPU its typed loads would
// fault with the sticky CUDA_ERROR_MISALIGNED_ADDRESS, losing the
// context), and so are misaligned keys or priorities of a device
// priority update.
func TestMisalignedOperandsAreRefused(t *testing.T) {
	b := newBackend(t)
	a, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	ga := a.(*Arena)
	// tensor.FromMemory builds the misaligned view Backend.Tensor refuses.
	view := func(off uintptr, dt tensor.Dtype, n int) *tensor.Dense {
		return tensor.New(tensor.WithShape(n), tensor.Of(dt), tensor.WithEngine(DeviceEngine{}),
			tensor.FromMemory(uintptr(ga.Ptr())+off, uintptr(n)*dt.Size()))
	}
	good, err := b.Tensor(a, 1024, tensor.Float32, 64)
	if err != nil {
		t.Fatal(err)
	}
	n0 := b.Launches()
	for _, off := range []uintptr{1, 2, 6} {
		bad := view(off, tensor.Float32, 64)
		if err := b.ReLUGrad(bad, good, 64); !errors.Is(err, ErrBounds) || !strings.Contains(err.Error(), "not a multiple") {
			t.Errorf("ReLUGrad with dy at +%d: %v, want ErrBounds (misaligned)", off, err)
		}
		if err := b.ColSum(good, bad, 8, 8); !errors.Is(err, ErrBounds) {
			t.Errorf("ColSum with out at +%d: %v, want ErrBounds", off, err)
		}
	}
	if err := b.ReLUGrad(view(2048, tensor.Float32, 64), good, 64); err != nil {
		t.Fatalf("an aligned FromMemory view: %v", err)
	}
	if n := b.Launches() - n0; n != 1 {
		t.Fatalf("%d launches, want 1 (the aligned call's)", n)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestStandinMisalignedLaunchFaults: on the stand-in a kernel launched
// with a typed pointer argument that is not a multiple of its pointee's
// alignment (gen-align.sh's table) raises the sticky
// CUDA_ERROR_MISALIGNED_ADDRESS when it runs, as on a GPU: the next wait
// reports ErrDeviceLost with CUDA error 716 and later calls fail fast.
// It runs in a child process, whose context the fault ends.
func TestStandinMisalignedLaunchFaults(t *testing.T) {
	onStandin(t)
	const name = "TestStandinMisalignedLaunchFaults"
	if os.Getenv("TRAJRING_GPU_CHILD") != name {
		out, err, _ := child(t, name)
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	p := uint64(a.(*Arena).Ptr())
	if err := b.enter(); err != nil {
		t.Fatal(err)
	}
	// relu_grad(dy, y, n): dy two bytes past a float boundary.
	err = b.launchGrid(kernels.ReLUGrad, 16, 1, 1, p+2, p+1024, 16)
	b.exit()
	if err != nil {
		t.Fatalf("the launch itself: %v (the fault comes when it runs)", err)
	}
	err = b.Sync()
	if !errors.Is(err, ErrDeviceLost) || !strings.Contains(err.Error(), "CUDA error 716") {
		t.Fatalf("Sync after a misaligned launch: %v, want ErrDeviceLost with CUDA error 716", err)
	}
	if _, err := b.Alloc(64); !errors.Is(err, ErrDeviceLost) {
		t.Fatalf("Alloc after the fault: %v, want ErrDeviceLost", err)
	}
}

// TestStandinProfile: the stand-in reports the device of its profile
// (TRAJRING_STANDIN_PROFILE: the default's 2 SMs, or h200's 132 and its
// shared-memory limits; TRAJRING_STANDIN_SMS overrides the SM count),
// the backend sizes its grids from it (16 blocks an SM), and launches
// beyond the device's limits fail as on a real driver. Each profile runs
// in a child process (the driver reads them at cuInit).
func TestStandinProfile(t *testing.T) {
	onStandin(t)
	const name = "TestStandinProfile"
	if os.Getenv("TRAJRING_GPU_CHILD") == name {
		profileChild(t)
		return
	}
	for _, tc := range []struct {
		env            []string
		sms, sharedOpt int
	}{
		{[]string{"TRAJRING_STANDIN_PROFILE=default"}, 2, 232448},
		{[]string{"TRAJRING_STANDIN_PROFILE=h200"}, 132, 232448},
		{[]string{"TRAJRING_STANDIN_PROFILE=h200", "TRAJRING_STANDIN_SMS=7"}, 7, 232448},
	} {
		t.Run(strings.Join(tc.env, ","), func(t *testing.T) {
			env := append(tc.env, "WANT_SMS="+itoa(tc.sms), "WANT_SHARED_OPTIN="+itoa(tc.sharedOpt))
			out, err, _ := child(t, name, env...)
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
	// A profile the stand-in does not know is refused at cuInit, so a
	// typo never tests the wrong device.
	out, err, _ := child(t, name, "TRAJRING_STANDIN_PROFILE=h2000", "WANT_NO_DEVICE=1")
	if err != nil {
		t.Fatalf("child with an unknown profile: %v\n%s", err, out)
	}
}

func f32bytes(x []float32) []byte {
	out := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

func f32at(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

func profileChild(t *testing.T) {
	b, err := New()
	if os.Getenv("WANT_NO_DEVICE") == "1" {
		if !errors.Is(err, ErrNoDevice) {
			t.Fatalf("New with an unknown profile: %v, want ErrNoDevice", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	attr := func(a cu.DeviceAttribute) int {
		v, err := drv.dev.Attribute(a)
		if err != nil {
			t.Fatalf("attribute %v: %v", a, err)
		}
		return v
	}
	if got, want := attr(cu.MultiprocessorCount), os.Getenv("WANT_SMS"); itoa(got) != want {
		t.Fatalf("%d SMs, want %s", got, want)
	}
	// 97: CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (not named by gorgonia.org/cu).
	if got, want := attr(cu.DeviceAttribute(97)), os.Getenv("WANT_SHARED_OPTIN"); itoa(got) != want {
		t.Fatalf("%d bytes of opt-in shared memory a block, want %s", got, want)
	}
	if got := attr(cu.MaxSharedMemoryPerBlock); got != 48<<10 {
		t.Fatalf("%d bytes of shared memory a block, want 48 KiB", got)
	}
	if b.blocks != 16*drv.sms {
		t.Fatalf("grids of up to %d blocks on %d SMs, want 16 a SM", b.blocks, drv.sms)
	}
	// The backend's kernels run at its grid size (GEMM's shared memory
	// included) and match the reference: a ReLU gradient over more
	// elements than the default profile's grid covers in one stride.
	n := 40000
	dy, y := make([]float32, n), make([]float32, n)
	for i := range dy {
		dy[i], y[i] = float32(i%7)-3, float32(i%5)-2
	}
	a := mustArena(t, b, append(f32bytes(dy), f32bytes(y)...))
	tdy, err := b.Tensor(a, 0, tensor.Float32, n)
	if err != nil {
		t.Fatal(err)
	}
	ty, err := b.Tensor(a, int64(4*n), tensor.Float32, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReLUGrad(tdy, ty, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	if err := b.Download(got, a, 0); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := dy[i]
		if y[i] <= 0 {
			want = 0
		}
		if g := f32at(got, i); g != want {
			t.Fatalf("element %d: %v, want %v", i, g, want)
		}
	}
	// Launches past the device's limits fail as a real driver's do:
	// more threads a block than it has, dynamic shared memory past 48
	// KiB without opt-in, a grid's y past 65,535.
	fn := drv.fns[kernels.ReLUGrad.ID]
	args := newKernelArgs()
	defer freeKernelArgs(args)
	p := uint64(a.(*Arena).Ptr())
	args[0], args[1], args[2] = p, p+uint64(4*n), 16
	if err := b.enter(); err != nil {
		t.Fatal(err)
	}
	defer b.exit()
	for _, l := range []struct {
		name        string
		gx, gy, bx  int
		wantInvalid bool
	}{
		{"1025 threads a block", 1, 1, 1025, true},
		{"grid y 65536", 1, 65536, 256, true},
		{"one block of 1024 threads", 1, 1, 1024, false},
	} {
		err := launchKernel(fn, l.gx, l.gy, l.bx, b.stream, args, 3, b.bound)
		if l.wantInvalid != (err != nil && code(err) == int(cu.InvalidValue)) {
			t.Errorf("%s: %v, want CUDA_ERROR_INVALID_VALUE: %v", l.name, err, l.wantInvalid)
		}
	}
	if err := b.syncStream(); err != nil {
		t.Fatal(err)
	}
}
