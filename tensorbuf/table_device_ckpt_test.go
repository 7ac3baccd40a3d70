package tensorbuf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// TestCheckpointKeepsDevicePriorities: priorities set by
// UpdatePrioritiesDevice reach the checkpoint (Save learns them from the
// backend first, in every snapshot mode), a priority the host set after
// them (not yet patched into the mirror) is kept, and the loaded table
// selects on its backend again (DeviceSelection is recorded), with the
// original's priorities, tree and next draws. It runs on the default
// backend: the cpu backend in `make test`, the gpu backend on the
// stand-in in `make test-cuda`.
func TestCheckpointKeepsDevicePriorities(t *testing.T) {
	be, err := DefaultBackend()
	if err != nil {
		t.Skip(err)
	}
	_, onCPU := be.(*cpu.Backend)
	for _, mode := range []SnapshotMode{SnapshotCopy, SnapshotLock, SnapshotCopyOnWrite} {
		for _, a := range []float64{1, 0.6} {
			t.Run(fmt.Sprintf("%v/a%v", mode, a), func(t *testing.T) {
				// Exact everywhere with a = 1 and on the cpu backend (Go's
				// pow on both sides); the device's pow may differ from
				// math.Pow in the last bits.
				exact := a == 1 || onCPU
				b, err := New(Config{NumEnvs: 2, Capacity: 256, Fields: ckptFields, Backend: be, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				tbl, err := b.NewTable(TableConfig{Name: "t", Selector: Prioritized, PriorityExponent: a, Beta: 0.4, DeviceSelection: true, Seed: 3})
				if err != nil {
					t.Fatal(err)
				}
				w, err := b.NewWriter()
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				ckptAdd(t, b, w, 200)
				var keys []uint64
				for i := range 20 {
					k, err := tbl.Insert(Item{Row: i % 2, Start: int64(i), Len: 1 + i%3, Priority: 1})
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
				ctx := context.Background()
				bt := new(Batch)
				defer bt.Release()
				if err := tbl.SampleInto(ctx, bt, 4); err != nil { // the mirror exists
					t.Fatal(err)
				}
				// Keys 0..9 get i+0.5 on the device (key 3 twice: the last
				// wins); then the host sets key 1 to 7 (marked, not patched).
				want := make(map[uint64]float64)
				for _, k := range keys {
					want[k] = 1
				}
				uk := append(append([]uint64(nil), keys[:10]...), keys[3])
				up := make([]float32, len(uk))
				for i := range up {
					up[i] = float32(i) + 0.5
					want[uk[i]] = float64(up[i])
				}
				if err := tbl.UpdatePrioritiesDevice(deviceTensor(t, be, uk), deviceTensor(t, be, up)); err != nil {
					t.Fatal(err)
				}
				if err := tbl.UpdatePriorities([]uint64{keys[1]}, []float64{7}); err != nil {
					t.Fatal(err)
				}
				want[keys[1]] = 7
				var ckpt bytes.Buffer
				if err := b.Save(&ckpt, SaveOptions{Snapshot: mode}); err != nil {
					t.Fatal(err)
				}
				lb, err := Load(&ckpt, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer lb.Close()
				lt, err := lb.Table("t")
				if err != nil {
					t.Fatal(err)
				}
				if !lt.cfg.DeviceSelection || lt.dev == nil {
					t.Fatal("the loaded table selects on the host")
				}
				for _, tb := range []*Table{tbl, lt} {
					tb.mu.Lock()
					for _, k := range keys {
						s, ok := tb.lookup(k)
						if !ok {
							tb.mu.Unlock()
							t.Fatalf("key %#x gone", k)
						}
						if got := tb.items[s].Priority; got != want[k] {
							tb.mu.Unlock()
							t.Fatalf("%s table: key %#x: priority %v, want %v", map[bool]string{true: "original", false: "loaded"}[tb == tbl], k, got, want[k])
						}
						if gw, ww := lt.tree.get(int(s)), tbl.tree.get(int(s)); tb == lt && !(gw == ww || !exact && near(gw, ww)) {
							tb.mu.Unlock()
							t.Fatalf("key %#x: loaded weight %v, original %v", k, gw, ww)
						}
					}
					tb.mu.Unlock()
				}
				// The next draws of both tables are the same.
				lbt := new(Batch)
				defer lbt.Release()
				for call := range 3 {
					if err := tbl.SampleInto(ctx, bt, 64); err != nil {
						t.Fatal(err)
					}
					if err := lt.SampleInto(ctx, lbt, 64); err != nil {
						t.Fatal(err)
					}
					if err := bt.HostMeta(); err != nil {
						t.Fatal(err)
					}
					if err := lbt.HostMeta(); err != nil {
						t.Fatal(err)
					}
					for i := range bt.Keys {
						if bt.Keys[i] != lbt.Keys[i] {
							t.Fatalf("call %d draw %d: key %#x loaded, %#x original", call, i, lbt.Keys[i], bt.Keys[i])
						}
						if p, q := lbt.Probabilities[i], bt.Probabilities[i]; !(p == q || !exact && near(p, q)) {
							t.Fatalf("call %d draw %d: probability %v loaded, %v original", call, i, p, q)
						}
					}
				}
			})
		}
	}
}

// near reports whether x and y agree within a relative 1e-13.
func near(x, y float64) bool {
	return x == y || math.Abs(x-y) <= 1e-13*math.Max(math.Abs(x), math.Abs(y))
}

// plainBackend hides every optional interface of its backend (no
// ItemSelector, no PrioritySelector).
type plainBackend struct{ Backend }

// TestLoadDeviceSelectionTable: a checkpoint of a DeviceSelection table
// loads on a backend that can select (DeviceSelection kept), fails with
// ErrConfig (not ErrCorrupt) on one that cannot, and a checkpoint written
// before tables recorded their flags loads with host selection.
func TestLoadDeviceSelectionTable(t *testing.T) {
	save := func(omit bool) []byte {
		t.Helper()
		b := newCkptBuffer(t, cpu.New(), 2, 8, 24)
		for _, sel := range []Selector{Uniform, Prioritized} {
			tbl, err := b.NewTable(TableConfig{Name: fmt.Sprintf("dev-%v", sel), Selector: sel, DeviceSelection: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Insert(Item{Row: 1, Start: b.Oldest(1), Len: 2, Priority: 2}); err != nil {
				t.Fatal(err)
			}
		}
		omitTableFlags = omit
		defer func() { omitTableFlags = false }()
		var buf bytes.Buffer
		if err := b.Save(&buf, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	ckpt := save(false)
	info, err := ReadCheckpointInfo(bytes.NewReader(ckpt))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info.String(), "\n") {
		if f := strings.Fields(l); len(f) > 7 && strings.HasPrefix(f[0], "dev-") && f[7] != "device" {
			t.Errorf("summary line %q: want the table to select on the device", l)
		}
	}
	if !strings.Contains(info.String(), "selects on") {
		t.Errorf("summary lacks the selects-on column:\n%s", info)
	}
	for _, tc := range []struct {
		name string
		be   Backend
		data []byte
		dev  bool  // the tables select on the backend
		err  error // Load's error
	}{
		{"cpu", cpu.New(), ckpt, true, nil},
		{"no selector", plainBackend{cpu.New()}, ckpt, false, ErrConfig},
		{"old format", cpu.New(), save(true), false, nil},
		{"old format, no selector", plainBackend{cpu.New()}, save(true), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, err := Load(bytes.NewReader(tc.data), LoadOptions{Backend: tc.be})
			if tc.err != nil {
				if !errors.Is(err, tc.err) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "DeviceSelection") {
					t.Fatalf("Load: %v, want %v naming DeviceSelection", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			for _, sel := range []Selector{Uniform, Prioritized} {
				tbl, err := lb.Table(fmt.Sprintf("dev-%v", sel))
				if err != nil {
					t.Fatal(err)
				}
				if tbl.cfg.DeviceSelection != tc.dev || (tbl.dev != nil) != tc.dev {
					t.Fatalf("table %v: DeviceSelection %v (mirror %v), want %v", sel, tbl.cfg.DeviceSelection, tbl.dev != nil, tc.dev)
				}
				if _, err := tbl.Sample(context.Background(), 3); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
