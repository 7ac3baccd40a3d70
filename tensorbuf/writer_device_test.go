package tensorbuf_test

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// notHost is a tensor engine whose memory gorgonia.org/tensor sees as not
// host-accessible, as the gpu backend's device tensors are; nothing may
// read such a tensor's data.
type notHost struct{ tensor.StdEng }

func (notHost) AllocAccessible() bool { return false }

// TestAddRefusesUnreadableTensors (every build): a device tensor that the
// buffer's backend cannot read in place is refused with ErrForeignTensor
// when the backend reads device sources (DeviceScatterer: the cpu
// backend's own memory is host memory), with ErrDeviceTensor when it reads
// none, and with ErrDType or ErrShape before that when it does not fit
// the field; the refused Add writes nothing.
func TestAddRefusesUnreadableTensors(t *testing.T) {
	const envs = 2
	mem := make([]byte, 64)
	device := func(dt tensor.Dtype, shape ...int) *tensor.Dense {
		size := int(dt.Size())
		for _, d := range shape {
			size *= d
		}
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape...), tensor.WithEngine(notHost{}),
			tensor.FromMemory(uintptr(unsafe.Pointer(&mem[0])), uintptr(size)))
	}
	for _, tc := range []struct {
		name      string
		be        tensorbuf.Backend
		obs       *tensor.Dense
		want, not error
	}{
		{"a device tensor, cpu backend", cpu.New(), device(tensor.Float32, envs, 3), tensorbuf.ErrForeignTensor, nil},
		{"a device tensor, backend without device sources", plainBackend{cpu.New()}, device(tensor.Float32, envs, 3), tensorbuf.ErrDeviceTensor, tensorbuf.ErrForeignTensor},
		{"wrong dtype", cpu.New(), device(tensor.Float64, envs, 3), tensorbuf.ErrDType, tensorbuf.ErrDeviceTensor},
		{"wrong shape", cpu.New(), device(tensor.Float32, envs, 2), tensorbuf.ErrShape, tensorbuf.ErrDeviceTensor},
	} {
		buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: 4, Fields: testFields, Backend: tc.be})
		if err != nil {
			t.Fatal(err)
		}
		w, err := buf.NewWriter()
		if err != nil {
			t.Fatal(err)
		}
		step := makeStep(t, []int{0, 1}, []int64{0, 0}, []rawStep{{tensorbuf.First, tensorbuf.Mid, 0, 1}, {tensorbuf.First, tensorbuf.Mid, 0, 1}})
		step.Values["obs"] = tc.obs
		err = w.Add(step)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Add: %v, want %v", tc.name, err, tc.want)
		}
		if tc.not != nil && errors.Is(err, tc.not) {
			t.Errorf("%s: Add: %v, must not be %v", tc.name, err, tc.not)
		}
		if buf.Size() != 0 || buf.Cursor(0) != 0 || buf.Cursor(1) != 0 || buf.Stats().Steps != 0 {
			t.Errorf("%s: a refused Add wrote: size %d, cursors %d %d", tc.name, buf.Size(), buf.Cursor(0), buf.Cursor(1))
		}
		_ = buf.Close()
	}
	runtime.KeepAlive(mem)
}
