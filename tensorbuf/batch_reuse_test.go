package tensorbuf_test

import (
	"context"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestBatchFollowsItsBuffers samples one batch from two buffers of the same
// fields in turn, with batch sizes that grow (a new output arena) and
// shrink (the same arena, its gather columns reused), from the buffers
// directly and from a device-selecting table of each: every item must
// hold its own buffer's steps (the buffers differ in rewards and in the
// positions their rings hold).
func TestBatchFollowsItsBuffers(t *testing.T) {
	type src struct {
		b   *tensorbuf.Buffer
		m   *model
		tbl *tensorbuf.Table
	}
	mk := func(adds int, r0 float32) src {
		b, m := newBuffer(t, 2, 8), newModel(2, 8)
		var metas [][]rawStep
		for i := range adds {
			metas = append(metas, mids(2, r0+float32(10*i)))
		}
		fill(t, b, m, metas)
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", DeviceSelection: true, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			for s := m.oldest(r); s+2 <= m.cursor(r); s++ {
				if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: s, Len: 2}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return src{b, m, tbl}
	}
	a, b := mk(12, 0), mk(5, 500)
	ctx := context.Background()
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	for step, c := range []struct {
		s     src
		n     int
		table bool
	}{
		{a, 4, false}, {a, 6, false}, {a, 3, false}, {b, 3, false}, {b, 5, false}, {a, 2, false},
		{a, 4, true}, {a, 6, true}, {a, 3, true}, {b, 3, true}, {a, 3, true}, {b, 2, false}, {b, 2, true},
	} {
		var err error
		if c.table {
			err = c.s.tbl.SampleInto(ctx, bt, c.n)
		} else {
			err = c.s.b.SampleSequencesInto(bt, c.n, 2, tensorbuf.SequenceOptions{})
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		hb, err := bt.Host()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !c.table && (bt.KeyTensor != nil || len(hb.Keys) != 0) {
			t.Fatalf("step %d: a direct sample kept a device selection's keys (%v, %v)", step, bt.KeyTensor, hb.Keys)
		}
		if len(hb.Items) != c.n {
			t.Fatalf("step %d: %d items, want %d", step, len(hb.Items), c.n)
		}
		for i, it := range hb.Items {
			checkWindow(t, c.s.m, hb, i, it.Row, it.Start, it.Len)
		}
	}
}
