package tensorbuf

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// TestDirHugePagesWithoutDir: the mapping hint without a directory is a
// configuration error.
func TestDirHugePagesWithoutDir(t *testing.T) {
	if fileBackedForTests != nil {
		t.Skip("TRAJRING_TEST_FILE_BACKED gives every buffer without a Dir one")
	}
	if _, err := New(Config{NumEnvs: 1, Capacity: 4, DirHugePages: true}); !errors.Is(err, ErrConfig) {
		t.Fatalf("DirHugePages without Dir: %v, want ErrConfig", err)
	}
}

// TestDirHugePagesMatchesMemory: a buffer mapped for large folios stores
// what an in-memory one does, and reopens (with 4 KiB pages) to it.
func TestDirHugePagesMatchesMemory(t *testing.T) {
	mem, mw, mt := newKillBuffer(t, 1)
	defer mem.Close()
	dir := t.TempDir()
	fb, err := New(Config{NumEnvs: 4, Capacity: mem.Capacity(), Fields: killFields, Seed: 3, Dir: dir, DirHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	ft, err := fb.NewTable(TableConfig{Name: "uniform", Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	fw, err := fb.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	killAdd(t, mem, mw, mt, 300)
	killAdd(t, fb, fw, ft, 300)
	want := ckptBytes(t, mem)
	if !bytes.Equal(want, ckptBytes(t, fb)) {
		t.Fatal("checkpoints differ")
	}
	if err := fb.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if !bytes.Equal(want, ckptBytes(t, re)) {
		t.Fatal("the reopened buffer differs")
	}
}

// TestDirHugePagesFolios fills an 8 MiB ring twice, once as file-backed
// buffers are mapped by default and once with DirHugePages, and reads the
// ring file's mapping in /proc/self/smaps: by default no page of it is
// mapped as a 2 MiB folio (MADV_RANDOM took effect); with DirHugePages some
// are, unless the file system gives no large folios (then it skips).
func TestDirHugePagesFolios(t *testing.T) {
	for _, huge := range []bool{false, true} {
		dir := t.TempDir()
		const rows, capacity = 1, 8 << 20 / 64
		fields := []Field{{Name: "obs", Role: Observation, DType: Float32, Shape: []int{12}}}
		b, err := New(Config{NumEnvs: rows, Capacity: capacity, Fields: fields, Dir: dir, DirHugePages: huge})
		if err != nil {
			t.Fatal(err)
		}
		w, err := b.NewWriter()
		if err != nil {
			t.Fatal(err)
		}
		obs := tensor.New(tensor.WithShape(rows, 12), tensor.WithBacking(make([]float32, 12*rows)))
		st := Step{StepType: []StepType{First}, NextStepType: []StepType{Mid}, Reward: []float32{1}, Discount: []float32{1},
			Fields: []*tensor.Dense{obs}}
		for range capacity {
			if err := w.Add(&st); err != nil {
				t.Fatal(err)
			}
			st.StepType[0] = Mid
		}
		pmd, found := filePmdMappedKB(t, filepath.Join(dir, fileRingName(0)))
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		switch {
		case !found:
			t.Fatalf("huge=%v: no mapping of the ring file in /proc/self/smaps", huge)
		case !huge && pmd != 0:
			t.Fatalf("default mapping: %d kB mapped as 2 MiB folios, want none (MADV_RANDOM)", pmd)
		case huge && pmd == 0:
			t.Skip("DirHugePages: the file system of the test directory gave no 2 MiB folios (kernel or file system without large folios)")
		}
	}
}

// filePmdMappedKB sums FilePmdMapped over the mappings of path in
// /proc/self/smaps, and reports whether there was any.
func filePmdMappedKB(t *testing.T, path string) (int64, bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var kb int64
	found, in := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fs := strings.Fields(line)
		if len(fs) >= 5 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":") {
			in = strings.HasSuffix(line, " "+path) || fs[len(fs)-1] == path
			found = found || in
			continue
		}
		if in && len(fs) >= 2 && fs[0] == "FilePmdMapped:" {
			v, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			kb += v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kb, found
}
