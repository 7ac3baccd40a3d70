package cpu

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMapFile: a MapFile arena writes through to its file, flushes,
// reports its residency, evicts and reads back from the file, frees like
// any arena, and a retired one reads zeros.
func TestMapFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arena")
	const off, n = 4096, 3 << 20
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(off + n); err != nil {
		t.Fatal(err)
	}
	if _, err := MapFile(f, 100, n, SmallPages); err == nil {
		t.Fatal("an unaligned offset was mapped")
	}
	live := LiveBytes()
	a, err := MapFile(f, off, n, SmallPages)
	if err != nil {
		t.Fatal(err)
	}
	if LiveBytes() != live+n {
		t.Fatalf("LiveBytes %d, want %d", LiveBytes(), live+n)
	}
	b := a.Bytes()
	for i := 0; i < n; i += 4096 {
		b[i] = byte(i/4096 + 1)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1)
	if _, err := f.ReadAt(got, off+4096*7); err != nil || got[0] != 8 {
		t.Fatalf("file byte %v (%v), want 8", got, err)
	}
	if r, err := a.Resident(); err != nil || r != n {
		t.Fatalf("resident %d of %d: %v", r, n, err)
	}
	if err := a.Evict(f, off); err != nil {
		t.Fatal(err)
	}
	a.WillNeed(4096, 8192)
	if b[4096*7] != 8 {
		t.Fatal("data lost by Evict")
	}
	if err := New().Free(a); err != nil || LiveBytes() != live {
		t.Fatalf("Free: %v, LiveBytes %d", err, LiveBytes())
	}
	c, err := MapFile(f, off, n, NoAdvice)
	if err != nil {
		t.Fatal(err)
	}
	cb := c.Bytes()
	if err := c.Retire(); err != nil {
		t.Fatal(err)
	}
	if cb[4096*7] != 0 || LiveBytes() != live {
		t.Fatalf("a retired arena reads %d, LiveBytes %d", cb[4096*7], LiveBytes())
	}
}
