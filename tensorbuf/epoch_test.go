package tensorbuf_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/trajring/trajring/internal/philox"
	"github.com/trajring/trajring/tensorbuf"
)

// epochRef follows the documented draws of a WithoutReplacement table
// (see "Seeded draws" in the package documentation): an epoch's list
// starts as the live items in insertion order, and draw k of call c
// takes entry Index(Draw(seed, 0, c, k), m) of its m entries, moving the
// last entry into its place.
type epochRef struct {
	seed, call uint64
	live, left []uint64
}

func (r *epochRef) sample(n int) (keys []uint64, probs []float64) {
	call := r.call
	r.call++
	for k := range n {
		if len(r.left) == 0 {
			r.left = slices.Clone(r.live)
		}
		m := len(r.left)
		j := philox.Index(philox.Draw(r.seed, 0, call, uint32(k)), uint64(m))
		keys, probs = append(keys, r.left[j]), append(probs, 1/float64(m))
		r.left[j] = r.left[m-1]
		r.left = r.left[:m-1]
	}
	return keys, probs
}

func (r *epochRef) remove(key uint64) {
	if i := slices.Index(r.live, key); i >= 0 {
		r.live = slices.Delete(r.live, i, i+1)
	}
	if i := slices.Index(r.left, key); i >= 0 {
		r.left[i] = r.left[len(r.left)-1]
		r.left = r.left[:len(r.left)-1]
	}
}

// TestWithoutReplacementDraws pins a WithoutReplacement table's keys and
// probabilities to the documented draws, through epochs that end within
// a sample, deletes and inserts mid-epoch.
func TestWithoutReplacementDraws(t *testing.T) {
	type op struct {
		sample, del, insert int // del: insertion index + 1
	}
	for _, tc := range []struct {
		name  string
		seed  uint64
		items int
		ops   []op
	}{
		{"one epoch", 7, 6, []op{{sample: 6}}},
		{"epochs across samples", 3, 5, []op{{sample: 3}, {sample: 3}, {sample: 4}, {sample: 7}}},
		{"a sample larger than the table", 11, 3, []op{{sample: 8}}},
		{"delete mid-epoch", 5, 6, []op{{sample: 2}, {del: 4}, {del: 1}, {sample: 4}, {sample: 3}}},
		{"insert mid-epoch waits", 9, 4, []op{{sample: 3}, {insert: 1}, {insert: 1}, {sample: 1}, {sample: 6}}},
		{"delete everything left", 13, 4, []op{{sample: 2}, {del: 2}, {del: 3}, {del: 4}, {del: 1}, {insert: 1}, {insert: 1}, {sample: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prios := make([]float64, tc.items)
			_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.WithoutReplacement, Seed: tc.seed}, prios...)
			ref := &epochRef{seed: tc.seed, live: slices.Clone(keys)}
			for i, o := range tc.ops {
				switch {
				case o.sample > 0:
					bt, err := tbl.Sample(context.Background(), o.sample)
					if err != nil {
						t.Fatal(err)
					}
					want, probs := ref.sample(o.sample)
					if !slices.Equal(bt.Keys, want) || !slices.Equal(bt.Probabilities, probs) {
						t.Fatalf("op %d: keys %v probabilities %v, want %v %v", i, bt.Keys, bt.Probabilities, want, probs)
					}
				case o.del > 0:
					tbl.Delete(keys[o.del-1])
					ref.remove(keys[o.del-1])
				case o.insert > 0:
					k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 1})
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
					ref.live = append(ref.live, k)
				}
			}
		})
	}
}

// TestWithoutReplacementEpochs: with a fixed set of items, every run of
// N consecutive draws (N items) holds each item once, whatever the
// sample sizes; an item inserted mid-epoch is drawn only once the epoch
// is over, and a deleted one never again.
func TestWithoutReplacementEpochs(t *testing.T) {
	const n = 7
	_, tbl, keys := tableWith(t, tensorbuf.TableConfig{Name: "t", Selector: tensorbuf.WithoutReplacement, Seed: 1}, make([]float64, n)...)
	var drawn []uint64
	for _, size := range []int{1, 3, 5, 2, 7, 4, 6, 8} { // 36 draws: 5 epochs and 1 draw
		drawn = append(drawn, sampleKeys(t, tbl, size)...)
	}
	for e := 0; e+n <= len(drawn); e += n {
		got := slices.Clone(drawn[e : e+n])
		slices.Sort(got)
		if !slices.Equal(got, keys) {
			t.Fatalf("epoch %d drew %v, want each of %v once", e/n, drawn[e:e+n], keys)
		}
	}
	// 6 draws of the current epoch are left; a new item waits for them.
	k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: 1, Len: 1})
	if err != nil {
		t.Fatal(err)
	}
	tbl.Delete(keys[0])
	rest := sampleKeys(t, tbl, 5)
	if slices.Contains(rest, k) || slices.Contains(rest, keys[0]) {
		t.Fatalf("mid-epoch draws %v hold the new item %d or the deleted %d", rest, k, keys[0])
	}
	next := sampleKeys(t, tbl, 7)
	if slices.Contains(next, keys[0]) || !slices.Contains(next, k) {
		t.Fatalf("draws %v: want the new item %d and not the deleted %d", next, k, keys[0])
	}
}

// refTable is a plain model of a MinHeap, MaxHeap or WithoutReplacement
// table: items in insertion order, the top found by a linear scan, the
// epoch kept as a set (which items may still be drawn, not in what
// order).
type refTable struct {
	sel     tensorbuf.Selector
	maxSize int
	mts     int
	items   []refItem
	tick    uint64
	inEpoch map[uint64]bool
}

type refItem struct {
	key   uint64
	prio  float64
	tick  uint64
	times int
}

func (m *refTable) find(key uint64) int {
	return slices.IndexFunc(m.items, func(it refItem) bool { return it.key == key })
}

func (m *refTable) remove(key uint64) {
	if i := m.find(key); i >= 0 {
		m.items = slices.Delete(m.items, i, i+1)
		delete(m.inEpoch, key)
	}
}

func (m *refTable) insert(key uint64, p float64) {
	if m.maxSize > 0 && len(m.items) >= m.maxSize {
		m.remove(m.items[0].key)
	}
	m.items = append(m.items, refItem{key: key, prio: p, tick: m.tick})
	m.tick++
}

// top returns the index of the heap's top.
func (m *refTable) top() int {
	best := 0
	for i, it := range m.items {
		b := m.items[best]
		if it.prio != b.prio && (it.prio < b.prio) == (m.sel == tensorbuf.MinHeap) || it.prio == b.prio && it.tick < b.tick {
			best = i
		}
	}
	return best
}

func (m *refTable) budget() int {
	s := 0
	for _, it := range m.items {
		s += m.mts - it.times
	}
	return s
}

// TestOrderSelectorsAgainstModel runs random inserts (priorities with
// many ties), deletes, priority updates and samples on each new selector,
// with and without MaxTimesSampled and MaxSize, and checks every sampled
// key (heaps) or that it may be drawn (WithoutReplacement: still in the
// epoch, which is refilled with every live item once empty), its
// probability, the refusals and the sizes against refTable.
func TestOrderSelectorsAgainstModel(t *testing.T) {
	ctx := context.Background()
	for _, sel := range []tensorbuf.Selector{tensorbuf.MinHeap, tensorbuf.MaxHeap, tensorbuf.WithoutReplacement} {
		for _, lim := range []struct{ mts, maxSize int }{{0, 0}, {2, 0}, {0, 6}, {3, 9}} {
			cfg := tensorbuf.TableConfig{Name: "t", Selector: sel, MaxTimesSampled: lim.mts, MaxSize: lim.maxSize, Seed: 17}
			t.Run(sel.String(), func(t *testing.T) {
				_, tbl, _ := tableWith(t, cfg)
				m := &refTable{sel: sel, maxSize: lim.maxSize, mts: lim.mts, inEpoch: map[uint64]bool{}}
				rng := rand.New(rand.NewPCG(uint64(sel), uint64(lim.mts*100+lim.maxSize)))
				for step := range 600 {
					switch op := rng.IntN(10); {
					case op < 4:
						p := float64(rng.IntN(4))
						k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: int64(rng.IntN(8)), Len: 1, Priority: p})
						if err != nil {
							t.Fatal(err)
						}
						m.insert(k, p)
					case op < 5 && len(m.items) > 0:
						k := m.items[rng.IntN(len(m.items))].key
						tbl.Delete(k)
						m.remove(k)
					case op < 6 && len(m.items) > 0:
						var ks []uint64
						var ps []float64
						for range 1 + rng.IntN(3) {
							i := rng.IntN(len(m.items))
							p := float64(rng.IntN(4))
							ks, ps = append(ks, m.items[i].key), append(ps, p)
							m.items[i].prio, m.items[i].tick = p, m.tick
							m.tick++
						}
						if err := tbl.UpdatePriorities(ks, ps); err != nil {
							t.Fatal(err)
						}
					default:
						n := 1 + rng.IntN(5)
						bt, err := tbl.Sample(ctx, n)
						if len(m.items) == 0 || m.mts > 0 && m.budget() < n {
							if !errors.Is(err, tensorbuf.ErrEmpty) {
								t.Fatalf("step %d: sample of %d from %d items: %v, want ErrEmpty", step, n, len(m.items), err)
							}
							continue
						}
						if err != nil {
							t.Fatal(err)
						}
						for d, k := range bt.Keys {
							i, p := m.find(k), 1.0
							if sel == tensorbuf.WithoutReplacement {
								if len(m.inEpoch) == 0 {
									for _, it := range m.items {
										m.inEpoch[it.key] = true
									}
								}
								p = 1 / float64(len(m.inEpoch))
								if !m.inEpoch[k] {
									t.Fatalf("step %d draw %d: key %d is not left in the epoch %v", step, d, k, m.inEpoch)
								}
								delete(m.inEpoch, k)
							} else if want := m.items[m.top()].key; k != want {
								t.Fatalf("step %d draw %d: key %d, want %d (%+v)", step, d, k, want, m.items)
							}
							if bt.Probabilities[d] != p || bt.Weights[d] != 1 {
								t.Fatalf("step %d draw %d: probability %v weight %v, want %v and 1", step, d, bt.Probabilities[d], bt.Weights[d], p)
							}
							if m.items[i].times++; m.mts > 0 && m.items[i].times >= m.mts {
								m.remove(k)
							}
						}
					}
					if tbl.Size() != len(m.items) {
						t.Fatalf("step %d: size %d, model %d", step, tbl.Size(), len(m.items))
					}
				}
			})
		}
	}
}

// TestOrderSelectorsConcurrent inserts, deletes, updates and samples at
// once on each new selector while a writer overwrites the ring (evicting
// items), for -race; with MaxTimesSampled 1, no key is drawn twice.
func TestOrderSelectorsConcurrent(t *testing.T) {
	for _, sel := range []tensorbuf.Selector{tensorbuf.MinHeap, tensorbuf.MaxHeap, tensorbuf.WithoutReplacement} {
		t.Run(sel.String(), func(t *testing.T) {
			b := newBuffer(t, 1, 16)
			tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: sel, MaxTimesSampled: 1, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			w, err := b.NewWriter()
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			seen := map[uint64]bool{}
			wg.Add(3)
			go func() { // writer and inserter
				defer wg.Done()
				for pos := range int64(400) {
					if err := w.Add(makeStep(t, []int{0}, []int64{pos}, mids(1, float32(pos)))); err != nil {
						t.Error(err)
						return
					}
					k, err := tbl.Insert(tensorbuf.Item{Row: 0, Start: pos, Len: 1, Priority: float64(pos % 5)})
					if err != nil {
						t.Error(err)
						return
					}
					if pos%7 == 0 {
						tbl.Delete(k - 1) // maybe a key, maybe not
					}
				}
			}()
			for g := range 2 {
				go func() { // samplers; one also updates priorities
					defer wg.Done()
					bt := new(tensorbuf.Batch)
					for range 300 {
						if err := tbl.SampleInto(context.Background(), bt, 1+g); err != nil {
							if !errors.Is(err, tensorbuf.ErrEmpty) {
								t.Error(err)
								return
							}
							continue
						}
						mu.Lock()
						for _, k := range bt.Keys {
							if seen[k] {
								t.Errorf("key %d drawn twice with MaxTimesSampled 1", k)
							}
							seen[k] = true
						}
						mu.Unlock()
						if g == 0 {
							_ = tbl.UpdatePriorities(bt.Keys[:1], []float64{3}) // gone already: ErrUnknownKey
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestOrderSelectorsCheckpoint: a loaded MinHeap table breaks its ties by
// insertion order (the order of updates is not saved), and a loaded
// WithoutReplacement table begins a new epoch with its draws numbered on
// from the saved call count.
func TestOrderSelectorsCheckpoint(t *testing.T) {
	b, heap, hk := tableWith(t, tensorbuf.TableConfig{Name: "heap", Selector: tensorbuf.MinHeap}, 1, 1, 1, 2)
	wr, err := b.NewTable(tensorbuf.TableConfig{Name: "wr", Selector: tensorbuf.WithoutReplacement, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	var wk []uint64
	for i := range 5 {
		k, err := wr.Insert(tensorbuf.Item{Row: 0, Start: int64(i), Len: 1})
		if err != nil {
			t.Fatal(err)
		}
		wk = append(wk, k)
	}
	if err := heap.UpdatePriorities(hk[:1], []float64{1}); err != nil {
		t.Fatal(err)
	}
	if got := sampleKeys(t, heap, 1); got[0] != hk[1] {
		t.Fatalf("before saving: key %d, want %d", got[0], hk[1])
	}
	ref := &epochRef{seed: 4, live: slices.Clone(wk)}
	first := sampleKeys(t, wr, 3)
	if want, _ := ref.sample(3); !slices.Equal(first, want) {
		t.Fatalf("before saving: %v, want %v", first, want)
	}
	var buf bytes.Buffer
	if err := b.Save(&buf, tensorbuf.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	lb, err := tensorbuf.Load(&buf, tensorbuf.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	lh, err := lb.Table("heap")
	if err != nil {
		t.Fatal(err)
	}
	if got := sampleKeys(t, lh, 1); got[0] != hk[0] {
		t.Fatalf("loaded: key %d, want the first inserted %d", got[0], hk[0])
	}
	lw, err := lb.Table("wr")
	if err != nil {
		t.Fatal(err)
	}
	ref.left = nil // a new epoch
	got := sampleKeys(t, lw, 5)
	if want, _ := ref.sample(5); !slices.Equal(got, want) {
		t.Fatalf("loaded: %v, want a new epoch %v", got, want)
	}
}
