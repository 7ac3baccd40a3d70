package tensorbuf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The file kill test's child: it opens the file-backed buffer in the
// directory named by fileKillEnv, says "ready", and then adds steps,
// inserts items, samples both tables, updates priorities and syncs,
// announcing each sync's cursor of row 0 ("sync N") before it starts,
// until it is killed. With fileKillStageEnv set to a stage of a sync
// (flush, state, journal, done) it says "at" and waits to be killed when
// its third sync reaches that stage.
const (
	fileKillEnv      = "TRAJRING_FILE_KILL_DIR"
	fileKillStageEnv = "TRAJRING_FILE_KILL_STAGE"
)

func TestFileKillChild(t *testing.T) {
	dir := os.Getenv(fileKillEnv)
	if dir == "" {
		t.Skip("the file kill test's child process")
	}
	if stage := os.Getenv(fileKillStageEnv); stage != "" {
		n := 0
		syncTestHook = func(s string) {
			if s == stage {
				if n++; n == 3 {
					fmt.Println("at")
					select {}
				}
			}
		}
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Table("uniform")
	if err != nil {
		t.Fatal(err)
	}
	pt, err := b.Table("prio")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	go func() { // a sampler
		for {
			if bt, err := tb.Sample(context.Background(), 4); err == nil {
				_ = bt.Release()
			}
			if bt, err := b.SampleSequences(2, 3, SequenceOptions{}); err == nil {
				_ = bt.Release()
			}
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for {
		killAdd(t, b, w, tb, 1+rng.IntN(int(b.capacity)/3))
		if _, err := pt.Insert(Item{Row: 1, Start: b.Cursor(1) - 1, Len: 1, Priority: rng.Float64()}); err != nil {
			t.Fatal(err)
		}
		if bt, err := pt.Sample(context.Background(), 4); err == nil {
			ps := make([]float64, len(bt.Keys))
			for i := range ps {
				ps[i] = rng.Float64() + 0.1
			}
			_ = pt.UpdatePriorities(bt.Keys, ps)
			_ = bt.Release()
		}
		if rng.IntN(3) == 0 {
			fmt.Printf("sync %d\n", b.Cursor(0))
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFileKill kills a child process (kill -9) while it writes, samples,
// updates priorities and syncs a file-backed buffer, at random points and
// at every stage of a sync: each time the directory must reopen to a
// state a sync wrote (row 0's cursor one the child announced), with every
// stored step holding what it was written with, and tables that sample.
// TRAJRING_FILE_KILLS sets the number of random kills (12).
func TestFileKill(t *testing.T) {
	if os.Getenv(fileKillEnv) != "" {
		t.Skip("in the child")
	}
	kills := 12
	if raceEnabled {
		kills = 4
	}
	if v, err := strconv.Atoi(os.Getenv("TRAJRING_FILE_KILLS")); err == nil && v > 0 {
		kills = v
	}
	dir := t.TempDir()
	b, w, tb := newFileKillBuffer(t, dir, 256)
	if _, err := b.NewTable(TableConfig{Name: "prio", Selector: Prioritized, PriorityExponent: 0.6, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	killAdd(t, b, w, tb, 5)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	synced := map[int64]bool{5: true}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	stages := []string{"flush", "state", "journal", "done"}
	reopened := map[int64]bool{}
	for k := range kills + len(stages) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), fileKillEnv+"="+dir)
		stage := ""
		if k >= kills {
			stage = stages[k-kills]
			cmd.Env = append(cmd.Env, fileKillStageEnv+"="+stage)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(out)
		if line, _ := rd.ReadString('\n'); line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q: %s", line, stderr.String())
		}
		var mu sync.Mutex
		at := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					return
				}
				if line == "at\n" {
					close(at)
					continue
				}
				if c, ok := strings.CutPrefix(strings.TrimSpace(line), "sync "); ok {
					n, _ := strconv.ParseInt(c, 10, 64)
					mu.Lock()
					synced[n] = true
					mu.Unlock()
				}
			}
		}()
		if stage != "" {
			select {
			case <-at:
			case <-time.After(60 * time.Second):
				t.Fatalf("stage %s: the child never got there: %s", stage, stderr.String())
			}
		} else {
			time.Sleep(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-done
		lb, err := Open(dir)
		if err != nil {
			t.Fatalf("kill %d (stage %q): the directory does not reopen: %v", k, stage, err)
		}
		verifyStored(t, lb)
		c := lb.Cursor(0)
		mu.Lock()
		ok := synced[c]
		mu.Unlock()
		if !ok {
			t.Fatalf("kill %d (stage %q): reopened at row 0 cursor %d, which no sync wrote", k, stage, c)
		}
		reopened[c] = true
		for _, name := range []string{"uniform", "prio"} {
			lt, err := lb.Table(name)
			if err != nil {
				t.Fatal(err)
			}
			if bt, err := lt.Sample(context.Background(), 3); err != nil && !errors.Is(err, ErrEmpty) {
				t.Fatalf("kill %d: table %s: %v", k, name, err)
			} else if err == nil {
				_ = bt.Release()
			}
		}
		if err := lb.Close(); err != nil {
			t.Fatal(err)
		}
		// The reopened state is synced (Open and Close sync): the next
		// child starts from it.
		synced[c] = true
	}
	t.Logf("%d kills, %d distinct synced states reopened", kills+len(stages), len(reopened))
}
