package tensorbuf_test

import (
	"testing"

	"github.com/trajring/trajring/internal/philox"
	"github.com/trajring/trajring/tensorbuf"
)

// TestTableDrawsArePhilox pins what a seeded table selects, so that every
// backend (and the device-side selection) can reproduce it: draw k of
// the table's c-th sampling call is x = philox.Draw(Seed, 0, c, k); a
// uniform table takes live item Index(x, size) in insertion order (no
// item removed yet), a prioritized one the first item whose running sum
// of priorities^a exceeds Float64(x) × total. The expected keys are
// computed here by a linear scan, not by the table's sum tree. Both the
// batched path and the one-at-a-time path (MaxTimesSampled) draw the
// same way.
func TestTableDrawsArePhilox(t *testing.T) {
	prios := []float64{1, 2, 3, 4, 0.5, 6, 7, 0.25}
	for _, tc := range []struct {
		name string
		cfg  tensorbuf.TableConfig
	}{
		{"uniform", tensorbuf.TableConfig{Selector: tensorbuf.Uniform, Seed: 7}},
		{"uniform one at a time", tensorbuf.TableConfig{Selector: tensorbuf.Uniform, Seed: 7, MaxTimesSampled: 1000}},
		{"prioritized", tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, Seed: 11}},
		{"prioritized one at a time", tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, Seed: 11, MaxTimesSampled: 1000}},
		{"prioritized a=2", tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, Seed: 3, PriorityExponent: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "t"
			_, tbl, keys := tableWith(t, tc.cfg, prios...)
			a := tc.cfg.PriorityExponent
			if a == 0 {
				a = 1
			}
			total := 0.0
			for _, p := range prios {
				total += pow(p, a)
			}
			for call := range uint64(3) {
				got := sampleKeys(t, tbl, 16)
				for k, key := range got {
					x := philox.Draw(tc.cfg.Seed, 0, call, uint32(k))
					want := -1
					if tc.cfg.Selector == tensorbuf.Uniform {
						want = int(philox.Index(x, uint64(len(keys))))
					} else {
						u, acc := philox.Float64(x)*total, 0.0
						for i, p := range prios {
							if acc += pow(p, a); acc > u {
								want = i
								break
							}
						}
					}
					if want < 0 || key != keys[want] {
						t.Fatalf("call %d draw %d: key %d, want item %d (key %v)", call, k, key, want, keys)
					}
				}
			}
		})
	}
}

func pow(p, a float64) float64 {
	r := 1.0
	for range int(a) {
		r *= p
	}
	return r
}

// TestDirectDrawsArePhilox pins the draws of the direct samplers: call c
// of a buffer (counted over SampleSequences and SampleTransitions
// together) takes window k as number Index(philox.Draw(Seed, 1, c, k),
// total) of the windows counted row by row, oldest start first, when it
// does not start at a boundary (rows here hold none).
func TestDirectDrawsArePhilox(t *testing.T) {
	const rows, steps, seed = 3, 6, 21
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: 8, Fields: hostTimeFields["low-dim"], Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	w, err := buf.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	for range steps {
		if err := w.Add(fullStep(hostTimeFields["low-dim"], rows)); err != nil {
			t.Fatal(err)
		}
	}
	for call, l := range []int{2, 1, 3} {
		perRow := int64(steps - l + 1)
		var gotRows []int
		var gotStarts []int64
		if call == 1 {
			tr, err := buf.SampleTransitions(10)
			if err != nil {
				t.Fatal(err)
			}
			gotRows, gotStarts = tr.Rows, tr.Steps
			perRow = steps - 1 // a transition needs its successor
			_ = tr.Release()
		} else {
			bt, err := buf.SampleSequences(10, l, tensorbuf.SequenceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range bt.Items {
				gotRows, gotStarts = append(gotRows, it.Row), append(gotStarts, it.Start)
			}
			_ = bt.Release()
		}
		for k := range gotRows {
			u := int64(philox.Index(philox.Draw(seed, 1, uint64(call), uint32(k)), uint64(rows*perRow)))
			if gotRows[k] != int(u/perRow) || gotStarts[k] != u%perRow {
				t.Fatalf("call %d window %d: row %d start %d, want row %d start %d", call, k, gotRows[k], gotStarts[k], u/perRow, u%perRow)
			}
		}
	}
}
