package tensorbuf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/tensorbuf"
)

// TestDeviceTransitionsMatchHost samples n-step transitions (horizons 1
// and 3) from uniform and prioritized tables that select on the backend
// and from their host-selecting twins of the same seed, over rows with
// terminations, truncations, boundary steps, cuts and items of one to
// five steps, with steps written and cuts marked between calls (the
// metadata mirror's incremental sync). The device-selected transitions
// must equal the host-selected ones bit for bit (tensors, keys,
// probabilities, validity, rows, steps, items; weights as SampleInto's,
// exact on the cpu backend), the masked weight tensor must equal
// MaskedWeights32, and the metadata mirror the buffer's, on the default
// backend and on the cpu backend, the reference; the two backends must
// agree.
func TestDeviceTransitionsMatchHost(t *testing.T) {
	want := deviceTransitions(t, cpu.New())
	def, err := tensorbuf.DefaultBackend()
	if err != nil {
		t.Skipf("no default backend: %v", err)
	}
	if got := deviceTransitions(t, def); got != want {
		t.Fatalf("%s backend sampled\n%s\ncpu backend sampled\n%s", def.Name(), got, want)
	}
}

func deviceTransitions(t *testing.T, be tensorbuf.Backend) string {
	t.Helper()
	const rows, capacity = 4, 32
	fields := hostTimeFields["low-dim"]
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Fields: fields, Seed: 7, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	w, err := buf.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	step := 0
	// add writes k steps; a row restart >= 0 gets a First step that does
	// not follow its previous step (the writer cuts that step).
	add := func(k, restart int) {
		for range k {
			s := fullStep(fields, rows)
			for r := range rows {
				switch pos := step + 2*r; pos % 9 {
				case 0:
					s.StepType[r] = tensorbuf.First
				case 7:
					s.NextStepType[r] = tensorbuf.Last
					if r%2 == 0 {
						s.Discount[r] = 0 // terminates; odd rows truncate
					}
				case 8:
					s.StepType[r], s.NextStepType[r] = tensorbuf.Last, tensorbuf.First
				}
				s.Reward[r] = float32(100*r+step) / 8
			}
			if restart >= 0 {
				s.StepType[restart] = tensorbuf.First
			}
			obs := s.Values["obs"].Data().([]float32)
			for i := range obs {
				obs[i] = float32(step*1000 + i)
			}
			act := s.Values["act"].Data().([]int64)
			for i := range act {
				act[i] = int64(step*10 + i)
			}
			if err := w.Add(s); err != nil {
				t.Fatal(err)
			}
			step++
		}
	}
	add(40, -1)
	ctx := context.Background()
	var sb strings.Builder
	for _, sel := range []tensorbuf.Selector{tensorbuf.Uniform, tensorbuf.Prioritized} {
		var tables [2]*tensorbuf.Table
		for i := range tables {
			cfg := tensorbuf.TableConfig{Name: fmt.Sprintf("%v%d", sel, i), Selector: sel, Seed: 11, Beta: 0.6, DeviceSelection: i == 1}
			if tables[i], err = buf.NewTable(cfg); err != nil {
				t.Fatal(err)
			}
		}
		insert := func(from int64) {
			for r := range rows {
				cur := int64(step)
				for s := from; s < cur; s += 2 {
					l := 1 + (r+int(s))%5
					if s+int64(l) > cur {
						continue
					}
					for _, tbl := range tables {
						if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: s, Len: l, Priority: float64(1 + (r+int(s))%4)}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
		insert(int64(step) - 24)
		var trs [2]*tensorbuf.TableTransitions
		for i := range trs {
			trs[i] = new(tensorbuf.TableTransitions)
			defer trs[i].Release()
		}
		for call := range 7 {
			opt := tensorbuf.NStepOptions{Horizon: []int{1, 3}[call%2], DiscountFactor: 0.75}
			var dumps [2]string
			for i, tbl := range tables {
				tr := trs[i]
				if err := tbl.SampleTransitionsInto(ctx, tr, 24, opt); err != nil {
					t.Fatal(err)
				}
				if i == 1 {
					if tr.KeyTensor == nil || len(tr.Keys) != 0 || len(tr.Valid) != 0 || len(tr.Rows) != 0 {
						t.Fatalf("%v call %d: device sample with key tensor %v, keys %v, valid %v, rows %v", sel, call, tr.KeyTensor, tr.Keys, tr.Valid, tr.Rows)
					}
					if err := tensorbuf.CheckMetaMirror(tbl); err != nil {
						t.Fatalf("%v call %d: %v", sel, call, err)
					}
					masked, valid, err := tensorbuf.DeviceSelectionHost(tr)
					if err != nil {
						t.Fatal(err)
					}
					if err := tr.HostMeta(); err != nil {
						t.Fatal(err)
					}
					if want := tr.MaskedWeights32(nil); !reflect.DeepEqual(masked, want) {
						t.Fatalf("%v call %d: masked weight tensor %v, MaskedWeights32 %v", sel, call, masked, want)
					}
					for j, v := range tr.Valid {
						if valid[j] != map[bool]byte{false: 0, true: 1}[v] {
							t.Fatalf("%v call %d: valid tensor %v, Valid %v", sel, call, valid, tr.Valid)
						}
					}
				}
				dumps[i] = fmt.Sprintf("%v n=%d keys %v\nprobs %v\nvalid %v rows %v steps %v\nitems %v size %d\n%s",
					sel, opt.Horizon, tr.Keys, tr.Probabilities, tr.Valid, tr.Rows, tr.Steps, tr.Items, tr.TableSize,
					hostTransitions(t, &tr.Transitions))
			}
			// Importance weights (Beta 0.6) are exact on the cpu backend
			// and within a relative 1e-13 elsewhere (the device's pow), as
			// for SampleInto.
			hw, dw := trs[0].Weights, trs[1].Weights
			for j := range hw {
				if hw[j] != dw[j] && (be.Name() == "cpu" || math.Abs(hw[j]-dw[j]) > 1e-13*hw[j]) {
					t.Fatalf("%s %v call %d: weight %d: host %v, device %v", be.Name(), sel, call, j, hw[j], dw[j])
				}
			}
			if dumps[0] != dumps[1] {
				t.Fatalf("%s call %d: host selection\n%s\ndevice selection\n%s", be.Name(), call, dumps[0], dumps[1])
			}
			sb.WriteString(dumps[0])
			// New steps and cuts between calls: the mirror follows.
			switch call {
			case 2:
				add(1, -1)
				if err := w.MarkCut(1, 3); err != nil {
					t.Fatal(err)
				}
				insert(int64(step) - 3)
			case 3:
				add(1, 2) // cuts row 2's step before
				add(1, -1)
				insert(int64(step) - 4)
			case 4:
				if err := w.MarkCut(0, 2); err != nil { // the newest steps, in place
					t.Fatal(err)
				}
			default:
				add(1+call%2, -1)
			}
		}
	}
	return sb.String()
}

// failingSelector is the cpu backend with NStepCheck or NStepRewardAt
// failing on demand.
type failingSelector struct {
	*cpu.Backend
	failCheck, failReward bool
}

var errInjected = fmt.Errorf("injected failure")

func (f *failingSelector) NStepCheck(c kernels.TransitionCheck) error {
	if f.failCheck {
		return errInjected
	}
	return f.Backend.NStepCheck(c)
}

func (f *failingSelector) NStepRewardAt(rew tensorbuf.Column, out tensorbuf.Arena, outOff int64, wins tensorbuf.Arena, winOff, n, capacity int64, gamma float64) error {
	if f.failReward {
		return errInjected
	}
	return f.Backend.NStepRewardAt(rew, out, outOff, wins, winOff, n, capacity, gamma)
}

// TestDeviceTransitionsFailureConsumesNothing: a device-selected sample
// whose check or reward launch fails returns ErrBackend and consumes
// nothing: the next call draws what the first call would have drawn, as
// a twin table that never failed does.
func TestDeviceTransitionsFailureConsumesNothing(t *testing.T) {
	fs := &failingSelector{Backend: cpu.New()}
	fields := hostTimeFields["low-dim"]
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 16, Fields: fields, Seed: 3, Backend: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	w, err := buf.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if err := w.Add(fullStep(fields, 2)); err != nil {
			t.Fatal(err)
		}
	}
	var tables [2]*tensorbuf.Table
	for i := range tables {
		if tables[i], err = buf.NewTable(tensorbuf.TableConfig{Name: fmt.Sprint(i), Selector: tensorbuf.Prioritized, Seed: 4, DeviceSelection: true}); err != nil {
			t.Fatal(err)
		}
		for s := int64(0); s < 10; s++ {
			if _, err := tables[i].Insert(tensorbuf.Item{Row: int(s % 2), Start: s, Len: 3, Priority: float64(1 + s%3)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	opt := tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 0.5}
	dump := func(tbl *tensorbuf.Table) string { return sampledTransitions(t, tbl, 8, opt) }
	for _, tc := range []struct {
		name string
		set  func(bool)
	}{
		{"check", func(v bool) { fs.failCheck = v }},
		{"reward", func(v bool) { fs.failReward = v }},
	} {
		tc.set(true)
		tr := new(tensorbuf.TableTransitions)
		err := tables[0].SampleTransitionsInto(ctx, tr, 8, opt)
		tc.set(false)
		tr.Release()
		if !errors.Is(err, tensorbuf.ErrBackend) || !errors.Is(err, errInjected) {
			t.Fatalf("%s failure: %v, want ErrBackend wrapping the injected error", tc.name, err)
		}
		if got, want := dump(tables[0]), dump(tables[1]); got != want {
			t.Fatalf("after a %s failure the table sampled\n%s\nits twin\n%s", tc.name, got, want)
		}
	}
}

// TestDeviceTransitionsAfterLoad: a buffer restored from a checkpoint
// (taken after device-selected samples, with cuts and episode ends
// stored) builds its metadata mirror anew, and its DeviceSelection table's
// next transitions are the original table's next ones, on the default
// backend and the cpu backend.
func TestDeviceTransitionsAfterLoad(t *testing.T) {
	def, err := tensorbuf.DefaultBackend()
	if err != nil {
		t.Skip(err)
	}
	for _, be := range []tensorbuf.Backend{cpu.New(), def} {
		fields := hostTimeFields["low-dim"]
		buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 16, Fields: fields, Seed: 3, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		w, err := buf.NewWriter()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			s := fullStep(fields, 2)
			s.Reward[0], s.Reward[1] = float32(i), float32(-i)
			if i%6 == 4 {
				s.NextStepType[0], s.Discount[0] = tensorbuf.Last, 0
			}
			if i%6 == 5 {
				s.StepType[0], s.NextStepType[0] = tensorbuf.Last, tensorbuf.First
			}
			if err := w.Add(s); err != nil {
				t.Fatal(err)
			}
			if i == 12 {
				if err := w.MarkCut(1); err != nil {
					t.Fatal(err)
				}
			}
		}
		tbl, err := buf.NewTable(tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Uniform, Seed: 8, DeviceSelection: true})
		if err != nil {
			t.Fatal(err)
		}
		for s := int64(5); s < 17; s++ {
			if _, err := tbl.Insert(tensorbuf.Item{Row: int(s % 2), Start: s, Len: 3}); err != nil {
				t.Fatal(err)
			}
		}
		opt := tensorbuf.NStepOptions{Horizon: 2, DiscountFactor: 0.5}
		dump := func(tbl *tensorbuf.Table) string { return sampledTransitions(t, tbl, 10, opt) }
		dump(tbl)
		var ckpt bytes.Buffer
		if err := buf.Save(&ckpt, tensorbuf.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		lb, err := tensorbuf.Load(&ckpt, tensorbuf.LoadOptions{Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		lt, err := lb.Table("t")
		if err != nil {
			t.Fatal(err)
		}
		for call := range 2 {
			if got, want := dump(lt), dump(tbl); got != want {
				t.Fatalf("%s call %d: the loaded table sampled\n%s\nthe original\n%s", be.Name(), call, got, want)
			}
			if err := tensorbuf.CheckMetaMirror(lt); err != nil {
				t.Fatalf("%s: %v", be.Name(), err)
			}
		}
		_ = lb.Close()
		_ = buf.Close()
	}
}

// sampledTransitions samples n transitions of tbl and prints their keys,
// validity, steps and host copies, for comparing two tables' draws.
func sampledTransitions(t *testing.T, tbl *tensorbuf.Table, n int, opt tensorbuf.NStepOptions) string {
	t.Helper()
	tr := new(tensorbuf.TableTransitions)
	defer tr.Release()
	if err := tbl.SampleTransitionsInto(context.Background(), tr, n, opt); err != nil {
		t.Fatal(err)
	}
	if err := tr.HostMeta(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("keys %v valid %v steps %v\n%s", tr.Keys, tr.Valid, tr.Steps, hostTransitions(t, &tr.Transitions))
}
