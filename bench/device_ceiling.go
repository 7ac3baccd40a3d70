package bench

import (
	"errors"
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
)

// maxDeviceSource bounds the source region a device ceiling rotates over:
// large enough that consecutive copies do not hit the device's L2 cache
// (50 MB on an H200), small enough to fit next to the buffer.
const maxDeviceSource = 1 << 30

// deviceCeiling is the ceiling on a device backend: a device-to-device
// copy of the same bytes (DESIGN.md), from a source that rotates over a
// region as large as the scenario's ring (up to 1 GiB), waited for with
// Sync as the engine's operations are.
type deviceCeiling struct {
	be       tensorbuf.Backend
	cp       DeviceCopier
	src, dst tensorbuf.Arena
	off      int64
}

func newDeviceCeiling(be tensorbuf.Backend, cfg CeilingConfig) (*deviceCeiling, error) {
	cp, ok := be.(DeviceCopier)
	if !ok {
		return nil, fmt.Errorf("%w: %q cannot copy between arenas", ErrNoCeiling, be.Name())
	}
	ring := int64(cfg.NumEnvs) * int64(cfg.Capacity) * cfg.Layout.StepBytes()
	srcSize := max(cfg.PlainBytes, min(ring, maxDeviceSource), 1)
	d := &deviceCeiling{be: be, cp: cp}
	var err error
	if d.src, err = be.Alloc(srcSize); err != nil {
		return nil, err
	}
	if d.dst, err = be.Alloc(max(cfg.PlainBytes, 1)); err != nil {
		be.Free(d.src)
		return nil, err
	}
	return d, nil
}

// Plain copies n bytes device to device and waits for the copy.
func (d *deviceCeiling) Plain(n int64) error {
	if n > d.dst.Size() {
		return fmt.Errorf("bench: plain copy of %d bytes, ceiling sized for %d", n, d.dst.Size())
	}
	if d.off+n > d.src.Size() {
		d.off = 0
	}
	if err := d.cp.Copy(d.dst, 0, d.src, d.off, n); err != nil {
		return err
	}
	d.off += n
	return d.be.Sync()
}

var errDeviceGather = errors.New("bench: no gather ceiling on a device backend")

// Gathers reports false: the device ceiling is the plain copy only.
func (d *deviceCeiling) Gathers() bool { return false }

func (d *deviceCeiling) Windows([]tensorbuf.Window, int64) error { return errDeviceGather }
func (d *deviceCeiling) Transitions(_, _ []int64) error          { return errDeviceGather }
func (d *deviceCeiling) Scatter([]int64) error                   { return errDeviceGather }

func (d *deviceCeiling) Close() error {
	return errors.Join(d.be.Free(d.src), d.be.Free(d.dst))
}
