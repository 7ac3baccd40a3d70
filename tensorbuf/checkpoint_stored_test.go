package tensorbuf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/trajring/trajring/cpu"
	"gorgonia.org/tensor"
)

// TestCheckpointLoadsVersion2 loads checkpoints committed in
// testdata/, written by format version 2 (whole arenas) from the buffers
// newCkptBuffer builds with the same arguments: each must restore that
// buffer exactly and behave as it does.
func TestCheckpointLoadsVersion2(t *testing.T) {
	for _, tc := range []struct {
		file                  string
		envs, capacity, steps int
	}{
		{"v2-partial.ckpt", 3, 16, 10},     // rows 62-69% full, never-written slots saved as zeros
		{"v2-wrapped-zstd.ckpt", 3, 8, 13}, // every row wrapped, compressed chunks
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			info, err := ReadCheckpointInfo(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if info.Version != 2 {
				t.Errorf("info version %d, want 2", info.Version)
			}
			for _, upload := range []bool{false, true} {
				orig := newCkptBuffer(t, nil, tc.envs, tc.capacity, tc.steps)
				loadViaUpload = upload
				loaded, err := Load(bytes.NewReader(data), LoadOptions{Backend: cpu.New()})
				loadViaUpload = false
				if err != nil {
					t.Fatal(err)
				}
				defer loaded.Close()
				if got, want := stateString(t, loaded), stateString(t, orig); got != want {
					t.Fatalf("upload %v: restored state differs: %s", upload, firstDiff(want, got))
				}
				if got, want := behaviour(t, loaded), behaviour(t, orig); got != want {
					t.Fatalf("upload %v: restored buffer behaves differently: %s", upload, firstDiff(want, got))
				}
			}
		})
	}
}

// newMixedBuffer builds a buffer of 5 rows of 16 steps filled unevenly
// (the given steps per row, one writer per row), with a table holding an
// item in every row that has 2 steps.
func newMixedBuffer(t testing.TB, steps []int) *Buffer {
	t.Helper()
	b, err := New(Config{NumEnvs: len(steps), Capacity: 16, Fields: ckptFields, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	tb, err := b.NewTable(TableConfig{Name: "uniform", Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	for r, n := range steps {
		w, err := b.NewWriter(r)
		if err != nil {
			t.Fatal(err)
		}
		ckptAdd(t, b, w, n)
		_ = w.Close()
		if n >= 2 {
			if _, err := tb.Insert(Item{Row: r, Start: int64(n) - 2, Len: 2, Priority: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b
}

// mixedSteps: an empty row, a short one, one just full, one wrapped, one
// one step short of full.
var mixedSteps = []int{0, 3, 16, 21, 15}

// TestCheckpointStoredRoundTrip saves a buffer whose rows are filled
// unevenly (empty, partial, full, wrapped), and an empty one, in every
// snapshot mode, plain and compressed, and loads it into host arenas and
// through Upload: the state must be the original's exactly (never-written
// slots zero on both sides), every stored step must hold what was
// written, and the metadata and arena sections must hold the stored
// steps only.
func TestCheckpointStoredRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		steps  []int
		stored int64
	}{
		{mixedSteps, 0 + 3 + 16 + 16 + 15},
		{[]int{0, 0}, 0},
	} {
		for _, opts := range []SaveOptions{
			{}, {Compress: true}, {Snapshot: SnapshotCopy}, {Snapshot: SnapshotLock, Compress: true},
		} {
			for _, upload := range []bool{false, true} {
				roundTripStored(t, tc.steps, tc.stored, opts, upload)
			}
		}
	}
}

// roundTripStored saves a newMixedBuffer of the given steps per row with
// opts, checks its sections and loads it (through Upload when upload is
// set): see TestCheckpointStoredRoundTrip.
func roundTripStored(t *testing.T, steps []int, stored int64, opts SaveOptions, upload bool) {
	t.Helper()
	orig := newMixedBuffer(t, steps)
	want := stateString(t, orig)
	name := fmt.Sprintf("steps %v, %v, compress %v, upload %v", steps, opts.Snapshot, opts.Compress, upload)
	data := saveBytes(t, orig, opts)
	got := sectionBytes(t, data)
	if n := got[sectionName(secMeta, 0)]; n != stored {
		t.Errorf("%s: %d bytes of metadata, want %d", name, n, stored)
	}
	for i := range orig.arenas {
		if n, want := got[sectionName(secArena, uint32(i))], stored*orig.arenas[i].stride; n != want {
			t.Errorf("%s: arena %d: %d bytes, want %d", name, i, n, want)
		}
	}
	loadViaUpload = upload
	lb, err := Load(bytes.NewReader(data), LoadOptions{Backend: cpu.New()})
	loadViaUpload = false
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer lb.Close()
	if got := stateString(t, lb); got != want {
		t.Fatalf("%s: restored state differs: %s", name, firstDiff(want, got))
	}
	verifyStored(t, lb)
	if stored == 0 {
		return
	}
	tr, err := lb.SampleTransitions(6)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Release()
	otr, err := orig.SampleTransitions(6)
	if err != nil {
		t.Fatal(err)
	}
	defer otr.Release()
	if got, want := transitionsString(tr), transitionsString(otr); got != want {
		t.Fatalf("%s: transitions differ: %s", name, firstDiff(want, got))
	}
}

// sectionBytes returns the raw bytes of each section of a checkpoint, by
// the sections' names, reading the chunk headers only.
func sectionBytes(t testing.TB, data []byte) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for p := data[fileHeaderLen:]; len(p) > 0; {
		if len(p) < chunkHeaderLen {
			t.Fatalf("%d bytes left, no chunk header", len(p))
		}
		name := sectionName(p[0], binary.LittleEndian.Uint32(p[4:]))
		out[name] += int64(binary.LittleEndian.Uint32(p[8:]))
		p = p[chunkHeaderLen+int(binary.LittleEndian.Uint32(p[12:])):]
	}
	return out
}

// TestCheckpointStoredCorruption flips every byte of a checkpoint of
// unevenly filled rows, cuts it at every length, and relabels its
// version 2 (every slot): each must fail with ErrCorrupt (every fifth
// flip and cut under -race: see sweepStride).
func TestCheckpointStoredCorruption(t *testing.T) {
	t.Parallel() // touches no shared state; runs beside the other sweeps
	orig := newMixedBuffer(t, mixedSteps)
	for _, compress := range []bool{false, true} {
		data := saveBytes(t, orig, SaveOptions{Compress: compress})
		for i := 0; i < len(data); i += sweepStride {
			bad := bytes.Clone(data)
			bad[i] ^= 0x5a
			if _, err := loadState(t, bad); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("compress %v: byte %d of %d flipped: %v", compress, i, len(data), err)
			}
		}
		for n := 0; n < len(data); n += sweepStride {
			if _, err := loadState(t, data[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("compress %v: cut at %d of %d: %v", compress, n, len(data), err)
			}
		}
		v2 := bytes.Clone(data)
		binary.LittleEndian.PutUint32(v2[8:], ckptVersionAll)
		binary.LittleEndian.PutUint32(v2[16:], crc32.Checksum(v2[:16], castagnoli))
		if _, err := loadState(t, v2); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `section "metadata"`) {
			t.Errorf("compress %v: relabelled version 2: %v", compress, err)
		}
	}
	old, err := os.ReadFile(filepath.Join("testdata", "v2-partial.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(old[8:], ckptVersion)
	binary.LittleEndian.PutUint32(old[16:], crc32.Checksum(old[:16], castagnoli))
	if _, err := loadState(t, old); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `section "metadata"`) {
		t.Errorf("version 2 file relabelled 3: %v", err)
	}
}

// TestCheckpointSizeOfStored checks the size of a checkpoint of a
// CartPole buffer (as trajring serve keeps) 1% full, exactly, from the
// data model: the file header, each section's chunks (a 24-byte header
// each) and payloads (header, rows' cursors, one metadata byte per stored
// step, one record of the arena's stride per stored step, end), no
// tables. It must be at most twice the stored steps' bytes.
func TestCheckpointSizeOfStored(t *testing.T) {
	fields := []Field{
		{Name: "observation", Role: Observation, DType: Float32, Shape: []int{4}},
		{Name: "action", Role: Action, DType: Int64},
	}
	const envs, capacity = 8, 10_000
	b, err := New(Config{NumEnvs: envs, Capacity: capacity, Fields: fields, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	step := &Step{Rows: []int{0, 1, 2, 3, 4, 5, 6, 7}, Values: map[string]*tensor.Dense{
		"observation": tensor.New(tensor.WithShape(envs, 4), tensor.WithBacking(make([]float32, envs*4))),
		"action":      tensor.New(tensor.WithShape(envs), tensor.WithBacking(make([]int64, envs))),
	}}
	for range envs {
		step.StepType = append(step.StepType, Mid)
		step.NextStepType = append(step.NextStepType, Mid)
		step.Reward = append(step.Reward, 1)
		step.Discount = append(step.Discount, 1)
	}
	const perRow = capacity / 100 // 1% full
	for range perRow {
		if err := w.Add(step); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()
	stored := int64(envs * perRow)
	if b.Size() != stored {
		t.Fatalf("size %d, want %d", b.Size(), stored)
	}
	header := int64(8 + 8 + 4 + 4 + 24 + 4 + len(marshalBufDraws(1, 0)) + 1) // + the layout byte
	for _, f := range fields {
		header += int64(4 + len(f.Name) + 1 + 1 + 4 + 8*len(f.Shape))
	}
	want := int64(fileHeaderLen) + (chunkHeaderLen + header) + (chunkHeaderLen + 8*envs) + (chunkHeaderLen + stored) + (chunkHeaderLen + 16)
	for i := range b.arenas {
		n := stored * b.arenas[i].stride
		want += n + chunkHeaderLen*max(1, (n+ckptChunk-1)/ckptChunk)
	}
	var rep SaveReport
	path := filepath.Join(t.TempDir(), "b.ckpt")
	if err := b.SaveFile(path, SaveOptions{Report: &rep}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != want || rep.Bytes != want {
		t.Fatalf("checkpoint of %d bytes (report %d), want %d", fi.Size(), rep.Bytes, want)
	}
	if data := stored * b.StepBytes(); want > 2*data {
		t.Fatalf("checkpoint of %d bytes for %d bytes of stored steps: more than twice", want, data)
	}
}

// failingReader yields data[:n], then fails every read with err.
type failingReader struct {
	data []byte
	n    int
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := copy(p, r.data[:r.n])
	r.data, r.n = r.data[k:], r.n-k
	return k, nil
}

// TestLoadReadErrors: a read that fails is reported with its error,
// wherever in the checkpoint it fails; a stream that ends early is
// ErrCorrupt and wraps the end; neither says "not a trajring checkpoint"
// of a stream that never had the chance to be one.
func TestLoadReadErrors(t *testing.T) {
	orig := newMixedBuffer(t, mixedSteps)
	data := saveBytes(t, orig, SaveOptions{})
	errDisk := errors.New("disk on fire")
	// The end section is its chunk header and 16 bytes; the last arena
	// chunk's payload ends right before it.
	inArena := len(data) - (chunkHeaderLen + 16) - 8
	for _, tc := range []struct {
		name    string
		n       int // bytes read before the failure
		err     error
		upload  bool
		corrupt bool   // ErrCorrupt as well
		says    string // in the message
	}{
		{"disk error at byte 0", 0, errDisk, false, false, "file header: reading byte 0: disk on fire"},
		{"disk error in the file header", 10, errDisk, false, false, "file header: reading byte 10: disk on fire"},
		{"disk error in the header section", fileHeaderLen + 3, errDisk, false, false, `section "header": reading chunk 0's header: disk on fire`},
		{"disk error in an arena", inArena, errDisk, false, false, "reading chunk"},
		{"disk error in an arena, uploading", inArena, errDisk, true, false, "reading chunk"},
		{"empty", 0, io.EOF, false, true, "not a trajring checkpoint (0 bytes)"},
		{"ends in the file header", 12, io.EOF, false, true, "file header: truncated"},
		{"ends in an arena", inArena, io.EOF, false, true, "truncated"},
		{"ends in an arena, uploading", inArena, io.EOF, true, true, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loadViaUpload = tc.upload
			b, err := Load(&failingReader{data: data, n: tc.n, err: tc.err}, LoadOptions{})
			loadViaUpload = false
			if err == nil {
				_ = b.Close()
				t.Fatal("loaded")
			}
			wantIs := tc.err
			if tc.corrupt && tc.n > 0 {
				wantIs = io.ErrUnexpectedEOF // io.ReadFull's, for a read cut short
			}
			if !errors.Is(err, wantIs) || errors.Is(err, ErrCorrupt) != tc.corrupt || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%v: want errors.Is %v, ErrCorrupt %v, saying %q", err, wantIs, tc.corrupt, tc.says)
			}
			if tc.n < fileHeaderLen+8 {
				_, err := ReadCheckpointInfo(&failingReader{data: data, n: tc.n, err: tc.err})
				if !errors.Is(err, wantIs) || errors.Is(err, ErrCorrupt) != tc.corrupt {
					t.Errorf("info: %v", err)
				}
			}
		})
	}
	// A directory cannot be read: its error, not "not a checkpoint".
	for _, load := range []func(string) error{
		func(p string) error { _, err := LoadFile(p, LoadOptions{}); return err },
		func(p string) error { _, err := ReadCheckpointInfoFile(p); return err },
	} {
		err := load(t.TempDir())
		if !errors.Is(err, syscall.EISDIR) || errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "not a trajring checkpoint") {
			t.Errorf("directory: %v, want EISDIR without ErrCorrupt", err)
		}
	}
}

// TestCheckpointCopyOnWritePartial lets a writer add 700 steps to both
// rows of a buffer 68% full in the middle of a copy-on-write save (before
// the pixel arena's second chunk, which holds the rest of row 1, is
// read): the checkpoint must be the cut, and the writer must have kept
// only the cut's steps it overwrote before they were streamed (row 1's
// slots 324 to 375), not the never-written slots it filled.
func TestCheckpointCopyOnWritePartial(t *testing.T) {
	b, err := New(Config{NumEnvs: 2, Capacity: 1024, Seed: 3, Backend: cpu.New(),
		Fields: []Field{{Name: "pix", Role: Observation, DType: Uint8, Shape: []int{cowStepBytes}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cowAdd(t, b, w, 700)
	want := stateString(t, b)
	// The first chunk of the pixel arena is row 0's 700 steps and row
	// 1's first 324 (4 MiB); the second starts at row 1's slot 324.
	second := int64(1024+324) * cowStepBytes
	ran := false
	cowTestHook = func(c int, off int64) {
		if c == b.cols[0].ar && off == second {
			cowAdd(t, b, w, 700)
			ran = true
		}
	}
	var out bytes.Buffer
	var rep SaveReport
	err = b.Save(&out, SaveOptions{Snapshot: SnapshotCopyOnWrite, Report: &rep})
	cowTestHook = nil
	if err != nil {
		t.Fatal(err)
	}
	if !ran || b.Cursor(1) != 1400 {
		t.Fatalf("the writer did not run during the save (ran %v, cursor %d)", ran, b.Cursor(1))
	}
	if want := int64(376-324) * cowStepBytes; rep.Preserved != want {
		t.Fatalf("preserved %d bytes, want %d", rep.Preserved, want)
	}
	lb, err := Load(&out, LoadOptions{Backend: cpu.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if got := stateString(t, lb); got != want {
		t.Fatalf("checkpoint is not the cut: %s", firstDiff(want, got))
	}
}
