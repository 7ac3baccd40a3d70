package tensorbuf

import (
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// TestRemoveDeadSlotPanics: removing a slot that holds no live item is an
// internal inconsistency, reported by a panic naming the slot rather than
// ignored (a silent return would leave evictRows looping on its heap).
func TestRemoveDeadSlotPanics(t *testing.T) {
	b := newCkptBuffer(t, cpu.New(), 1, 8, 4)
	tbl, err := b.NewTable(TableConfig{Name: "t", MaxSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	s := tbl.alloc() // a slot no item lives in
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "internal error: Table.remove of dead slot 0") {
			t.Fatalf("recovered %q, want the dead-slot panic", msg)
		}
	}()
	tbl.remove(s)
}
