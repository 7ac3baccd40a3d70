package tensorbuf

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// layoutFields add a 68-byte field to ckptFields: 108-byte records, 128
// bytes line-aligned and 112 packed, so the two layouts differ.
var layoutFields = append(append([]Field(nil), ckptFields...), Field{Name: "vel", Role: Observation, DType: Float32, Shape: []int{17}})

// TestRecordLayoutPersists: a buffer's record layout survives a
// checkpoint and a file-backed buffer's reopening, in both layouts: a
// packed buffer (one loaded from a file written before line-aligned
// records) writes headers without the layout byte, exactly as those files
// were written, and loads and reopens packed; a line-aligned one writes
// the byte and stays line-aligned. Each restored buffer holds and does
// what the original did, and its checkpoint is byte-identical to the
// original's.
func TestRecordLayoutPersists(t *testing.T) {
	header := map[bool]int64{}
	for _, packed := range []bool{false, true} {
		want := map[bool]int64{false: 128, true: 112}[packed]
		cfg := Config{NumEnvs: 3, Capacity: 8, Fields: layoutFields, Backend: cpu.New(), Seed: 7, packedRecords: packed}
		orig := newCkptBufferOf(t, cfg, 13)
		if orig.arenas[0].stride != want {
			t.Fatalf("packed %v: record stride %d, want %d", packed, orig.arenas[0].stride, want)
		}
		data := saveBytes(t, orig, SaveOptions{})
		header[packed] = sectionBytes(t, data)[sectionName(ckptio.SecHeader, 0)]
		loaded, err := Load(bytes.NewReader(data), LoadOptions{Backend: cpu.New()})
		if err != nil {
			t.Fatal(err)
		}
		defer loaded.Close()
		if loaded.packedRecords != packed || loaded.arenas[0].stride != want {
			t.Fatalf("packed %v: loaded packed %v, stride %d", packed, loaded.packedRecords, loaded.arenas[0].stride)
		}
		if got, want := stateString(t, loaded), stateString(t, orig); got != want {
			t.Fatalf("packed %v: restored state differs: %s", packed, firstDiff(want, got))
		}
		if got := saveBytes(t, loaded, SaveOptions{}); !bytes.Equal(got, data) {
			t.Fatalf("packed %v: the loaded buffer's checkpoint differs from the original's", packed)
		}
		if got, want := behaviour(t, loaded), behaviour(t, orig); got != want {
			t.Fatalf("packed %v: restored buffer behaves differently: %s", packed, firstDiff(want, got))
		}

		cfg.Dir = t.TempDir()
		fb := newCkptBufferOf(t, cfg, 13)
		data = saveBytes(t, fb, SaveOptions{})
		if err := fb.Close(); err != nil {
			t.Fatal(err)
		}
		ob, err := Open(cfg.Dir)
		if err != nil {
			t.Fatalf("packed %v: %v", packed, err)
		}
		defer ob.Close()
		if ob.packedRecords != packed || ob.arenas[0].stride != want {
			t.Fatalf("packed %v: reopened packed %v, stride %d", packed, ob.packedRecords, ob.arenas[0].stride)
		}
		verifyStored(t, ob)
		if got := saveBytes(t, ob, SaveOptions{}); !bytes.Equal(got, data) {
			t.Fatalf("packed %v: the reopened buffer's checkpoint differs from the one before Close", packed)
		}
	}
	if header[false] != header[true]+1 {
		t.Fatalf("header sections of %d bytes line-aligned and %d packed: want one layout byte more", header[false], header[true])
	}
}

// TestCheckpointUnknownRecordLayout: a header whose layout byte is not
// one this build knows fails to load with ErrCorrupt naming it.
func TestCheckpointUnknownRecordLayout(t *testing.T) {
	b := newCkptBufferOf(t, Config{NumEnvs: 2, Capacity: 8, Fields: layoutFields, Backend: cpu.New(), Seed: 7}, 5)
	b.mu.Lock()
	snap, err := b.snapshotLocked()
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	snap.layout = layoutLineAligned + 1
	var buf bytes.Buffer
	cw, err := newChunkWriter(&buf, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSnap(cw, snap); err != nil {
		t.Fatal(err)
	}
	if err := cw.End(); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bytes.NewReader(buf.Bytes()), LoadOptions{Backend: cpu.New()})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record layout 2") {
		t.Fatalf("Load: %v, want ErrCorrupt naming record layout 2", err)
	}
}
