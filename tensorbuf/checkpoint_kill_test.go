package tensorbuf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"unsafe"

	"gorgonia.org/tensor"
)

// The kill test's child: it builds a buffer, saves it, says "ready", and
// then adds steps and saves with SaveFile, again and again, until it is
// killed.
const killChildEnv = "TRAJRING_CKPT_KILL_CHILD"

// killFields add a 1000-byte field to ckptFields, so that the buffer's
// size is set by its capacity.
var killFields = append(append([]Field(nil), ckptFields...), Field{Name: "img", Role: Observation, DType: Uint8, Shape: []int{1000}})

func killStep(rows []int, pos []int64) *Step {
	s := ckptStep(rows, pos)
	img := make([]uint8, 1000*len(rows))
	for i := range rows {
		img[i*1000] = uint8(pos[i])
	}
	s.Values["img"] = tensor.New(tensor.WithShape(len(rows), 1000), tensor.WithBacking(img))
	return s
}

func newKillBuffer(t testing.TB, mb int) (*Buffer, *Writer, *Table) {
	const envs = 4
	b, err := New(Config{NumEnvs: envs, Capacity: max(8, mb<<20/envs/1040), Fields: killFields, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.NewTable(TableConfig{Name: "uniform", Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	return b, w, tb
}

func killAdd(t testing.TB, b *Buffer, w *Writer, tb *Table, n int) {
	rows := w.Rows()
	for range n {
		pos := make([]int64, len(rows))
		for i, r := range rows {
			pos[i] = b.Cursor(r)
		}
		if err := w.Add(killStep(rows, pos)); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Insert(Item{Row: int(pos[0] % int64(len(rows))), Start: pos[0], Len: 1, Priority: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

func killMB() int {
	if v, err := strconv.Atoi(os.Getenv("TRAJRING_CKPT_KILL_MB")); err == nil && v > 0 {
		return v
	}
	return 4
}

func TestCheckpointKillChild(t *testing.T) {
	path := os.Getenv(killChildEnv)
	if path == "" {
		t.Skip("the kill test's child process")
	}
	b, w, tb := newKillBuffer(t, killMB())
	killAdd(t, b, w, tb, int(b.capacity)+3)
	if err := b.SaveFile(path, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	for {
		killAdd(t, b, w, tb, 1+int(b.capacity)/7)
		if err := b.SaveFile(path, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// verifyStored checks that every stored step of the user fields holds
// the values its row and position were written with, and that the
// counters agree: a checkpoint's arenas are consistent with its cursors.
func verifyStored(t testing.TB, b *Buffer) {
	t.Helper()
	var sum int64
	for f := range ckptFields {
		c := &b.cols[f]
		a := b.arenas[c.ar].arena
		raw := make([]byte, a.Size())
		if err := b.be.Download(raw, a, 0); err != nil {
			t.Fatal(err)
		}
		for r := range b.numEnvs {
			for pos := b.oldest(r); pos < b.cursor[r]; pos++ {
				step := raw[b.slot(r, pos)*c.stride+c.off:][:c.stepBytes]
				for e := range c.Elems() {
					want := ckptVal(f, r, pos, e)
					var got float64
					switch c.DType {
					case Float32:
						got = float64(*(*float32)(unsafePointer(&step[4*e])))
					case Uint8:
						got = float64(step[e])
					case Int64:
						got = float64(*(*int64)(unsafePointer(&step[8*e])))
					}
					if got != want {
						t.Fatalf("row %d step %d field %s[%d] = %v, want %v (cursor %d)", r, pos, c.Name, e, got, want, b.cursor[r])
					}
				}
			}
		}
	}
	for r := range b.numEnvs {
		sum += b.cursor[r]
	}
	if s := b.Stats(); s.Steps != sum {
		t.Fatalf("stats %+v, cursors sum to %d", s, sum)
	}
}

// TestCheckpointKill kills a child process at random points while it
// saves checkpoints over one file: the file must always load and verify.
// TRAJRING_CKPT_KILL_MB sets the buffer's size (4 MiB by default) and
// TRAJRING_CKPT_KILLS the number of kills (20).
func TestCheckpointKill(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("in the child")
	}
	kills := 20
	if raceEnabled {
		kills = 6 // crash consistency is not a race; make test-sweeps kills 20
	}
	if v, err := strconv.Atoi(os.Getenv("TRAJRING_CKPT_KILLS")); err == nil && v > 0 {
		kills = v
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "buf.ckpt")
	b, w, tb := newKillBuffer(t, killMB())
	killAdd(t, b, w, tb, 5)
	start := time.Now()
	if err := b.SaveFile(path, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	// Spread the kills over the first few saves after the child's first.
	spread := 3*time.Since(start) + time.Millisecond
	_ = b.Close()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	versions := map[int64]bool{}
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q: %s", line, stderr.String())
		}
		time.Sleep(time.Duration(rng.Int64N(int64(spread))))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lb, err := LoadFile(path, LoadOptions{})
		if err != nil {
			t.Fatalf("kill %d: the checkpoint does not load: %v", k, err)
		}
		verifyStored(t, lb)
		versions[lb.Cursor(0)] = true
		_ = lb.Close()
	}
	t.Logf("%d kills, %d distinct checkpoints loaded", kills, len(versions))
}

// TestCheckpointWhileRunning saves again and again while a collector adds
// steps and inserts items and samplers sample every table: each
// checkpoint must be a consistent cut (arenas agree with cursors, items
// with the steps stored), in both snapshot modes.
func TestCheckpointWhileRunning(t *testing.T) {
	b, w, tb := newKillBuffer(t, 1)
	defer b.Close()
	killAdd(t, b, w, tb, 20)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			killAdd(t, b, w, tb, 1)
		}
	}()
	for range 2 {
		go func() {
			defer wg.Done()
			for !stop.Load() {
				bt, err := tb.Sample(context.Background(), 4)
				if err != nil {
					t.Error(err)
					return
				}
				_ = bt.Release()
				if _, err := b.SampleSequences(2, 3, SequenceOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var pauses [3]time.Duration
	for i := range 12 {
		var rep SaveReport
		var buf bytes.Buffer
		mode := []SnapshotMode{SnapshotCopy, SnapshotLock, SnapshotCopyOnWrite}[i%3]
		if err := b.Save(&buf, SaveOptions{Snapshot: mode, Report: &rep}); err != nil {
			t.Fatal(err)
		}
		pauses[i%3] = max(pauses[i%3], rep.Pause)
		lb, err := Load(&buf, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		verifyStored(t, lb)
		_ = lb.Close()
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("longest pause: copy %v, lock %v, copy-on-write %v", pauses[0], pauses[1], pauses[2])
}

func unsafePointer(p *byte) unsafe.Pointer { return unsafe.Pointer(p) }
