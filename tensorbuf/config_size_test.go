package tensorbuf_test

import (
	"errors"
	"math"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
)

// allocCounter is a backend that counts Alloc calls: New must refuse a
// configuration before allocating anything.
type allocCounter struct {
	*cpu.Backend
	allocs int
}

func (a *allocCounter) Alloc(n int64) (tensorbuf.Arena, error) {
	a.allocs++
	return a.Backend.Alloc(n)
}

// TestNewHugeConfig: sizes that overflow, or that no machine has memory
// for, are refused with ErrConfig before anything is allocated, and never
// panic (NumEnvs math.MaxInt used to panic in makeslice, NumEnvs 1<<34
// allocated per-row slices until the process died).
func TestNewHugeConfig(t *testing.T) {
	obs := func(dt tensorbuf.DType, shape ...int) []tensorbuf.Field {
		return []tensorbuf.Field{{Name: "obs", DType: dt, Shape: shape}}
	}
	for _, tc := range []struct {
		name     string
		cfg      tensorbuf.Config
		needsMem bool // refused by the memory check, not the overflow checks
	}{
		{name: "NumEnvs MaxInt", cfg: tensorbuf.Config{NumEnvs: math.MaxInt, Capacity: 1}},
		{name: "Capacity MaxInt", cfg: tensorbuf.Config{NumEnvs: 1, Capacity: math.MaxInt}},
		{name: "both MaxInt", cfg: tensorbuf.Config{NumEnvs: math.MaxInt, Capacity: math.MaxInt}},
		{name: "rows times capacity wraps", cfg: tensorbuf.Config{NumEnvs: 1 << 32, Capacity: 1 << 32}},
		{name: "NumEnvs 1<<34", cfg: tensorbuf.Config{NumEnvs: 1 << 34, Capacity: 1 << 10}, needsMem: true},
		{name: "ring of exactly 1 PiB", cfg: tensorbuf.Config{NumEnvs: 1 << 34, Capacity: 1 << 12}, needsMem: true},
		{name: "ring over 1 PiB", cfg: tensorbuf.Config{NumEnvs: 1 << 34, Capacity: 1 << 13}},
		{name: "shape product overflows", cfg: tensorbuf.Config{NumEnvs: 1, Capacity: 1, Fields: obs(tensorbuf.Float32, 1<<40, 1<<40)}},
		{name: "shape product wraps to zero", cfg: tensorbuf.Config{NumEnvs: 1, Capacity: 1, Fields: obs(tensorbuf.Float32, 1<<62, 4)}},
		{name: "shape MaxInt", cfg: tensorbuf.Config{NumEnvs: 1, Capacity: 1, Fields: obs(tensorbuf.Uint8, math.MaxInt)}},
		{name: "step bytes times steps", cfg: tensorbuf.Config{NumEnvs: 1, Capacity: 1 << 20, Fields: obs(tensorbuf.Float64, 1<<30)}},
		{name: "sum of step bytes", cfg: tensorbuf.Config{NumEnvs: 1, Capacity: 1, Fields: []tensorbuf.Field{
			{Name: "a", DType: tensorbuf.Float64, Shape: []int{1 << 47}},
			{Name: "b", DType: tensorbuf.Float64, Shape: []int{1 << 47}},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := cpu.MemAvailable(); tc.needsMem && err != nil {
				t.Skipf("host memory not known here (%v): only overflow checks apply", err)
			}
			// With the default backend.
			b, err := tensorbuf.New(tc.cfg)
			if !errors.Is(err, tensorbuf.ErrConfig) {
				if b != nil {
					b.Close()
				}
				t.Fatalf("New: %v, want ErrConfig", err)
			}
			// With a backend that reports no memory figure: the host
			// metadata check and the overflow checks still refuse it, and
			// nothing is allocated.
			be := &allocCounter{Backend: cpu.New()}
			cfg := tc.cfg
			cfg.Backend = be
			if _, err := tensorbuf.New(cfg); !errors.Is(err, tensorbuf.ErrConfig) {
				t.Fatalf("New with a counting backend: %v, want ErrConfig", err)
			}
			if be.allocs != 0 {
				t.Fatalf("%d arenas allocated before the configuration was refused", be.allocs)
			}
		})
	}
}
