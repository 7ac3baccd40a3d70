package tensorbuf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

// smallCheckpoint returns a small checkpoint and the state it holds.
func smallCheckpoint(t testing.TB, compress bool) ([]byte, string) {
	t.Helper()
	b := newCkptBuffer(t, nil, 2, 8, 24)
	return saveBytes(t, b, SaveOptions{Compress: compress}), stateString(t, b)
}

// loadState loads a checkpoint and returns its state, or the error.
func loadState(t testing.TB, data []byte) (string, error) {
	b, err := Load(bytes.NewReader(data), LoadOptions{})
	if err != nil {
		return "", err
	}
	defer b.Close()
	return stateString(t, b), nil
}

// TestCheckpointCorruption flips every byte of a small checkpoint, and
// cuts it at every length: each must fail with ErrCorrupt naming where
// (every fifth case under -race: see sweepStride).
func TestCheckpointCorruption(t *testing.T) {
	t.Parallel() // touches no shared state; runs beside the other sweeps
	for _, compress := range []bool{false, true} {
		data, _ := smallCheckpoint(t, compress)
		for i := 0; i < len(data); i += sweepStride {
			bad := bytes.Clone(data)
			bad[i] ^= 0x5a
			_, err := loadState(t, bad)
			if !errors.Is(err, ErrCorrupt) || !(strings.Contains(err.Error(), "section") || strings.Contains(err.Error(), "file header")) {
				t.Fatalf("compress %v: byte %d of %d flipped: %v", compress, i, len(data), err)
			}
		}
		for n := 0; n < len(data); n += sweepStride {
			_, err := loadState(t, data[:n])
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("compress %v: cut at %d of %d: %v", compress, n, len(data), err)
			}
		}
	}
}

// TestCheckpointForeignAndVersion refuses other files and other format
// versions with ErrCorrupt, and a different capacity with ErrConfig.
func TestCheckpointForeignAndVersion(t *testing.T) {
	data, _ := smallCheckpoint(t, false)
	// Version 1 (one arena section per column, before packed records) and
	// a future version 4 are both refused.
	v1 := bytes.Clone(data)
	binary.LittleEndian.PutUint32(v1[8:], 1)
	binary.LittleEndian.PutUint32(v1[16:], crc32.Checksum(v1[:16], castagnoli))
	v4 := bytes.Clone(data)
	binary.LittleEndian.PutUint32(v4[8:], 4)
	binary.LittleEndian.PutUint32(v4[16:], crc32.Checksum(v4[:16], castagnoli))
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a trajring checkpoint"},
		{"zip", []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00 and more bytes"), "not a trajring checkpoint"},
		{"version 1", v1, "version 1, this build reads versions 2 and 3"},
		{"version 4", v4, "version 4, this build reads versions 2 and 3"},
	} {
		_, err := loadState(t, tc.data)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrCorrupt with %q", tc.name, err, tc.want)
		}
		if _, err := ReadCheckpointInfo(bytes.NewReader(tc.data)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: info: %v", tc.name, err)
		}
	}
	_, err := Load(bytes.NewReader(data), LoadOptions{Capacity: 16})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "hold 8 steps, LoadOptions.Capacity asks 16") {
		t.Errorf("capacity 16: %v", err)
	}
	if b, err := Load(bytes.NewReader(data), LoadOptions{Capacity: 8}); err != nil {
		t.Errorf("capacity 8: %v", err)
	} else {
		_ = b.Close()
	}
}

// TestCheckpointInvariants refuses checkpoints whose checksums are right
// but whose tables break an invariant (as a bug or a crafted file
// would), instead of loading a table that misbehaves later.
func TestCheckpointInvariants(t *testing.T) {
	orig := newCkptBuffer(t, nil, 2, 8, 24)
	cases := []struct {
		name   string
		mutate func(s *bufSnap)
		want   string
	}{
		{"item outside the row", func(s *bufSnap) { s.tables[0].items[s.tables[0].live[0]].Start = -1 }, "outside row"},
		{"live list repeats", func(s *bufSnap) { s.tables[0].live[1] = s.tables[0].live[0] }, "live list"},
		{"order repeats", func(s *bufSnap) { s.tables[1].order[1] = s.tables[1].order[0] }, "insertion order"},
		{"heap order", func(s *bufSnap) {
			tb := &s.tables[0]
			for r, k := 0, 0; r < len(tb.heapLen); r++ {
				if n := int(tb.heapLen[r]); n >= 2 {
					tb.heap[k], tb.heap[k+1] = tb.heap[k+1], tb.heap[k]
					return
				} else {
					k += n
				}
			}
		}, "start heap"},
		{"budget", func(s *bufSnap) { s.tables[2].budget++ }, "sample budget"},
		{"cursor", func(s *bufSnap) { s.cursor[0] = -3 }, "cursor"},
		{"meta", func(s *bufSnap) { s.meta[0] = 0xff }, "metadata"},
		{"rng", func(s *bufSnap) { s.rng = []byte("junk") }, "rng"},
	}
	for _, tc := range cases {
		orig.mu.Lock()
		s, err := orig.snapshotLocked()
		orig.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		tc.mutate(s)
		var buf bytes.Buffer
		cw, err := newChunkWriter(&buf, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeSnap(cw, s); err != nil {
			t.Fatal(err)
		}
		_, err = Load(&buf, LoadOptions{})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrCorrupt with %q", tc.name, err, tc.want)
		}
	}
}

// FuzzLoad corrupts a small checkpoint (two byte changes and a cut, on
// the plain or the compressed form): Load must never panic, and a load
// that succeeds must give exactly the saved state.
func FuzzLoad(f *testing.F) {
	var data [2][]byte
	var want [2]string
	for i, c := range []bool{false, true} {
		data[i], want[i] = smallCheckpoint(f, c)
	}
	f.Add(false, uint32(0), byte(0), uint32(0), byte(0), uint32(0))
	f.Add(true, uint32(30), byte(1), uint32(0), byte(0), uint32(0))
	f.Add(false, uint32(100), byte(0x80), uint32(101), byte(0x80), uint32(400))
	f.Add(true, uint32(21), byte(4), uint32(44), byte(2), uint32(0))
	f.Fuzz(func(t *testing.T, compress bool, p1 uint32, x1 byte, p2 uint32, x2 byte, cut uint32) {
		k := 0
		if compress {
			k = 1
		}
		bad := bytes.Clone(data[k])
		bad[int(p1)%len(bad)] ^= x1
		bad[int(p2)%len(bad)] ^= x2
		if cut > 0 {
			bad = bad[:int(cut)%len(bad)]
		}
		got, err := loadState(t, bad)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if got != want[k] {
			t.Fatalf("loaded a different state: %s", firstDiff(want[k], got))
		}
	})
}

// TestCheckpointInfo reads a checkpoint's summary without its arenas.
func TestCheckpointInfo(t *testing.T) {
	b := newCkptBuffer(t, nil, 2, 8, 24)
	data := saveBytes(t, b, SaveOptions{})
	info, err := ReadCheckpointInfo(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if info.NumEnvs != 2 || info.Capacity != 8 || len(info.Fields) != 3 || info.StepBytes != b.StepBytes() ||
		info.ArenaBytes != 16*b.StepBytes() || info.StoredSteps != b.Size() || info.Stats != b.Stats() || len(info.Tables) != 4 {
		t.Fatalf("info %+v", info)
	}
	for i, c := range ckptTables {
		tb, _ := b.Table(c.Name)
		if ti := info.Tables[i]; ti.Config.Name != c.Name || ti.Config.Selector != c.Selector || ti.Size != tb.Size() || ti.MaxPriority != tb.MaxPriority() {
			t.Errorf("table %d: %+v, table size %d", i, ti, tb.Size())
		}
	}
	s := info.String()
	for _, want := range []string{"2 rows x 8 steps", "obs", "prioritized", "fifo"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}
