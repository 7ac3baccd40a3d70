package tensorbuf_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestSeededSamplesMatchAcrossBackends draws the same seeded samples
// (sequences, transitions, n-step transitions, uniform and prioritized
// table items and their one- and n-step transitions, host- and
// device-selected) from a buffer on the default
// backend (the gpu backend in cuda builds, on the stand-in in CI) and
// from the same buffer on the cpu backend, and requires the same windows
// and the same bytes: every sampler draws from Philox keyed by the seeds
// and the call numbers, so the backend cannot change what is selected.
func TestSeededSamplesMatchAcrossBackends(t *testing.T) {
	def, err := tensorbuf.DefaultBackend()
	if err != nil {
		t.Skipf("no default backend: %v", err)
	}
	got := seededSamples(t, def)
	want := seededSamples(t, cpu.New())
	if got != want {
		t.Fatalf("%s backend drew\n%s\ncpu backend drew\n%s", def.Name(), got, want)
	}
}

// seededSamples fills a buffer on be with distinct values (episodes of 7
// steps, so boundaries are rejected) and describes a fixed sequence of
// seeded samples, read back through host copies.
func seededSamples(t *testing.T, be tensorbuf.Backend) string {
	t.Helper()
	const rows, capacity = 4, 32
	fields := hostTimeFields["low-dim"]
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Fields: fields, Seed: 99, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	w, err := buf.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for step := range 45 {
		s := fullStep(fields, rows)
		for r := range rows {
			pos := step + r // rows out of phase
			switch pos % 7 {
			case 0:
				s.StepType[r] = tensorbuf.First
			case 6:
				s.StepType[r], s.NextStepType[r] = tensorbuf.Last, tensorbuf.First
			}
			if pos%7 == 5 {
				s.NextStepType[r] = tensorbuf.Last
			}
			s.Reward[r] = float32(100*r + step)
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
	}
	var sb strings.Builder
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	tr := new(tensorbuf.Transitions)
	defer tr.Release()
	for call := range 2 {
		if err := buf.SampleSequencesInto(bt, 16, 3, tensorbuf.SequenceOptions{EpisodeAware: call == 1}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "sequences %v\n%s", bt.Items, hostBatch(t, bt))
		if err := buf.SampleTransitionsInto(tr, 16); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "transitions %v %v\n%s", tr.Rows, tr.Steps, hostTransitions(t, tr))
		if err := buf.SampleNStepInto(tr, 16, tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.9}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "n-step %v %v\n%s", tr.Rows, tr.Steps, hostTransitions(t, tr))
	}
	_, devSel := be.(tensorbuf.ItemSelector)
	ttr := new(tensorbuf.TableTransitions)
	defer ttr.Release()
	for _, cfg := range []tensorbuf.TableConfig{
		{Name: "u", Selector: tensorbuf.Uniform, Seed: 5},
		{Name: "p", Selector: tensorbuf.Prioritized, Seed: 6},
		{Name: "ud", Selector: tensorbuf.Uniform, Seed: 5, DeviceSelection: devSel},
		{Name: "pd", Selector: tensorbuf.Prioritized, Seed: 6, DeviceSelection: devSel},
	} {
		tbl, err := buf.NewTable(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			for s := int64(20); s < 40; s += 3 {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: s, Len: 2, Priority: float64(1 + (r+int(s))%5)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for range 2 {
			if err := tbl.SampleInto(context.Background(), bt, 12); err != nil {
				t.Fatal(err)
			}
			if err := bt.HostMeta(); err != nil {
				t.Fatal(err)
			}
			// Host- and device-selected tables of one seed draw the
			// same items: print them under the selector's name alone.
			fmt.Fprintf(&sb, "table %v keys %v probs %v\n%s", cfg.Selector, bt.Keys, bt.Probabilities, hostBatch(t, bt))
		}
		// Transitions of the table's items, n-step 1 and 3 (selected on
		// the backend for the device-selecting tables).
		for _, h := range []int{1, 3} {
			if err := tbl.SampleTransitionsInto(context.Background(), ttr, 12, tensorbuf.NStepOptions{Horizon: h, DiscountFactor: 0.9}); err != nil {
				t.Fatal(err)
			}
			if err := ttr.HostMeta(); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "table %v transitions n=%d keys %v probs %v weights %v valid %v rows %v steps %v\n%s", cfg.Selector, h,
				ttr.Keys, ttr.Probabilities, ttr.Weights, ttr.Valid, ttr.Rows, ttr.Steps, hostTransitions(t, &ttr.Transitions))
		}
	}
	return sb.String()
}

// hostBatch prints every tensor of a host copy of bt, in name order.
func hostBatch(t *testing.T, bt *tensorbuf.Batch) string {
	t.Helper()
	h, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	return tensorsString(map[string]*tensor.Dense{"step_type": h.StepType, "next_step_type": h.NextStepType,
		"reward": h.Reward, "discount": h.Discount, "mask": h.Mask, "obs": h.Fields["obs"], "act": h.Fields["act"]})
}

// hostTransitions prints every tensor of a host copy of tr, in name order.
func hostTransitions(t *testing.T, tr *tensorbuf.Transitions) string {
	t.Helper()
	h, err := tr.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	return tensorsString(map[string]*tensor.Dense{"reward": h.Reward, "discount": h.Discount, "is_done": h.IsDone,
		"obs": h.Observation["obs"], "next_obs": h.NextObservation["obs"], "act": h.Action["act"]})
}

func tensorsString(m map[string]*tensor.Dense) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, k := range names {
		fmt.Fprintf(&sb, "  %s %v %v\n", k, m[k].Shape(), m[k].Data())
	}
	return sb.String()
}
