package tensorbuf_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestHostMetaItems: HostMeta fills a device-selected batch's Items from
// the table by key (Row, Start, Len, Pad, Priority), exactly the Items of
// the same sample selected on the host; an item that left the table since
// the sample becomes the zero Item, and a priority the host changed since
// shows its new value.
func TestHostMetaItems(t *testing.T) {
	b := newBuffer(t, 4, 64)
	m := newModel(4, 64)
	var metas [][]rawStep
	for i := range 60 {
		metas = append(metas, mids(4, float32(i)))
	}
	fill(t, b, m, metas)
	var tables [2]*tensorbuf.Table
	for i, dev := range []bool{false, true} {
		tbl, err := b.NewTable(tensorbuf.TableConfig{Name: []string{"host", "dev"}[i], Selector: tensorbuf.Prioritized, Seed: 4, DeviceSelection: dev})
		if err != nil {
			t.Fatal(err)
		}
		for k := range 40 {
			if _, err := tbl.Insert(tensorbuf.Item{Row: k % 4, Start: 20 + int64(k%13), Len: 1 + k%4, Pad: k % 3, Priority: float64(k%5) + 0.25}); err != nil {
				t.Fatal(err)
			}
		}
		tables[i] = tbl
	}
	ctx := context.Background()
	hb, db := new(tensorbuf.Batch), new(tensorbuf.Batch)
	defer hb.Release()
	defer db.Release()
	if err := tables[0].SampleInto(ctx, hb, 24); err != nil {
		t.Fatal(err)
	}
	if err := tables[1].SampleInto(ctx, db, 24); err != nil {
		t.Fatal(err)
	}
	if len(db.Items) != 0 {
		t.Fatalf("%d items before HostMeta", len(db.Items))
	}
	if err := db.HostMeta(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(db.Items, hb.Items) || !reflect.DeepEqual(db.Keys, hb.Keys) {
		t.Fatalf("items %+v keys %v\nwant %+v keys %v", db.Items, db.Keys, hb.Items, hb.Keys)
	}
	gone, changed := db.Keys[0], db.Keys[1]
	tables[1].Delete(gone)
	if gone != changed {
		if err := tables[1].UpdatePriorities([]uint64{changed}, []float64{9}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.HostMeta(); err != nil {
		t.Fatal(err)
	}
	for i, k := range db.Keys {
		want := hb.Items[i]
		switch k {
		case gone:
			want = tensorbuf.Item{}
		case changed:
			want.Priority = 9
		}
		if db.Items[i] != want {
			t.Fatalf("after a delete and an update: item %d (key %#x) %+v, want %+v", i, k, db.Items[i], want)
		}
	}
}
