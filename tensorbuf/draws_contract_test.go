package tensorbuf_test

import (
	"context"
	"math/bits"
	"slices"
	"testing"

	"github.com/trajring/trajring/internal/philox"
	"github.com/trajring/trajring/tensorbuf"
)

// contractDraw is draw k of call c on stream s under seed, computed from
// the package documentation ("Seeded draws") with philox.Block alone:
// the counter (k/2, s, c low, c high), the key (seed low, seed high),
// words 0 and 1 for an even k, 2 and 3 for an odd one.
func contractDraw(seed uint64, s uint32, c uint64, k uint32) uint64 {
	w := philox.Block([4]uint32{k / 2, s, uint32(c), uint32(c >> 32)}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	if k%2 == 1 {
		return uint64(w[2]) | uint64(w[3])<<32
	}
	return uint64(w[0]) | uint64(w[1])<<32
}

// contractIndex maps a draw to [0, n) as documented: the high word of x*n.
func contractIndex(x, n uint64) int {
	hi, _ := bits.Mul64(x, n)
	return int(hi)
}

// TestSeededDrawContract reproduces a Uniform table's samples from the
// documented contract alone: calls numbered from 0, stream 0 under
// TableConfig.Seed, draw k selecting entry Index(x, N) of the live list,
// which keeps insertion order except that a removed item's place takes
// the list's last entry (Delete between calls, MaxTimesSampled within
// one).
func TestSeededDrawContract(t *testing.T) {
	type op struct {
		sample int
		del    []int // insertion indices
		insert int
	}
	for _, tc := range []struct {
		name string
		cfg  tensorbuf.TableConfig
		ops  []op
	}{
		{"uniform", tensorbuf.TableConfig{Seed: 0x1234_5678_9abc_def0}, []op{
			{sample: 9}, {del: []int{1}}, {sample: 9}, {insert: 2}, {del: []int{0, 6}}, {sample: 9}}},
		{"uniform, items leaving mid-call", tensorbuf.TableConfig{Seed: 1 << 40, MaxTimesSampled: 2}, []op{
			{sample: 5}, {insert: 3}, {sample: 6}, {del: []int{7}}, {sample: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "t"
			_, tbl, keys := tableWith(t, tc.cfg, 1, 1, 1, 1, 1, 1)
			live := slices.Clone(keys)
			times := map[uint64]int{}
			remove := func(k uint64) {
				if i := slices.Index(live, k); i >= 0 {
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				}
			}
			var call uint64
			for i, o := range tc.ops {
				switch {
				case o.sample > 0:
					got := sampleKeys(t, tbl, o.sample)
					var want []uint64
					for k := range o.sample {
						key := live[contractIndex(contractDraw(tc.cfg.Seed, 0, call, uint32(k)), uint64(len(live)))]
						want = append(want, key)
						if times[key]++; tc.cfg.MaxTimesSampled > 0 && times[key] == tc.cfg.MaxTimesSampled {
							remove(key)
						}
					}
					call++
					if !slices.Equal(got, want) {
						t.Fatalf("op %d: keys %v, the contract gives %v", i, got, want)
					}
				case o.del != nil:
					for _, j := range o.del {
						tbl.Delete(keys[j])
						remove(keys[j])
					}
				default:
					for range o.insert {
						k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 3, Len: 1})
						if err != nil {
							t.Fatal(err)
						}
						keys, live = append(keys, k), append(live, k)
					}
				}
			}
		})
	}
}

// TestPriorityExponentZero: PriorityExponentZero makes a Prioritized
// table uniform (weights p^0 = 1, priority 0 included): probability 1/N,
// importance weight 1 at any Beta, and draw k selecting item
// floor(Float64(x) * N) of the slots; PriorityExponent 0 still means 1.
func TestPriorityExponentZero(t *testing.T) {
	prios := []float64{1, 2, 3, 0, 0.5, 8}
	for _, tc := range []struct {
		name string
		a    float64
		beta float64
		w    func(p float64) float64
	}{
		{"a=0", tensorbuf.PriorityExponentZero, 0.4, func(float64) float64 { return 1 }},
		{"a=0 beta=1", tensorbuf.PriorityExponentZero, 1, func(float64) float64 { return 1 }},
		{"0 means 1", 0, 0, func(p float64) float64 { return p }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.Prioritized, PriorityExponent: tc.a, Beta: tc.beta, Seed: 5}
			prios := slices.Clone(prios)
			_, tbl, keys := tableWith(t, cfg, prios...)
			for call := range uint64(3) {
				if call == 2 { // updates keep it uniform
					if err := tbl.UpdatePriorities(keys[:2], []float64{0, 100}); err != nil {
						t.Fatal(err)
					}
					prios[0], prios[1] = 0, 100
				}
				total := 0.0
				for _, p := range prios {
					total += tc.w(p)
				}
				bt, err := tbl.Sample(context.Background(), 12)
				if err != nil {
					t.Fatal(err)
				}
				for k, key := range bt.Keys {
					u, acc, want := philox.Float64(contractDraw(5, 0, call, uint32(k)))*total, 0.0, -1
					for i, p := range prios {
						if acc += tc.w(p); acc > u {
							want = i
							break
						}
					}
					if want < 0 || key != keys[want] {
						t.Fatalf("call %d draw %d: key %d, want item %d of %v", call, k, key, want, keys)
					}
					if p := tc.w(prios[want]) / total; bt.Probabilities[k] != p {
						t.Fatalf("call %d draw %d: probability %v, want %v", call, k, bt.Probabilities[k], p)
					}
					if tc.a == tensorbuf.PriorityExponentZero && bt.Weights[k] != 1 {
						t.Fatalf("call %d draw %d: weight %v, want 1", call, k, bt.Weights[k])
					}
				}
			}
		})
	}
}
