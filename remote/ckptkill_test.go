package remote

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/tensorbuf"
)

// The ingester kill test's child: it ingests frames of one actor (2 rows,
// K = 4) into a bare Ingester (no stream: frame n has stream sequence
// n+1) and checkpoints after each, into the directory named by
// ingestKillEnv, until it is killed. With ingestKillAtEnv set it instead
// checkpoints once, ingests one more frame and, in the next checkpoint,
// says "at STAGE" where checkpointStage reports STAGE, and waits there.
const (
	ingestKillEnv   = "TRAJRING_INGEST_KILL_CHILD"
	ingestKillAtEnv = "TRAJRING_INGEST_KILL_AT"
	ingestKillActor = 7
)

// ackedMsg is a message with only its data and an acknowledgement.
type ackedMsg struct{ dataMsg }

func (ackedMsg) Ack() error { return nil }

// killIngester is a bare Ingester over a buffer of 2 rows with one actor
// of 2 rows joined, and the frames it is fed.
type killIngester struct {
	in  *Ingester
	a   *actorState
	g   *gen
	seq uint64
}

func newKillIngester(t testing.TB, capacity int) *killIngester {
	t.Helper()
	in, err := newIngester(IngesterConfig{Buffer: newTestBuffer(t, 2, capacity)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := in.join(ingestKillActor, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.closeActors)
	return &killIngester{in: in, a: a, g: newGen(2)}
}

// ingest writes the actor's next frame as if it came with stream
// sequence seq+1.
func (k *killIngester) ingest(t testing.TB) {
	t.Helper()
	s := k.in.schema
	first := []int64{int64(k.seq) * 4, int64(k.seq) * 4}
	p := &Publisher{schema: s, cols: make([][]byte, len(s.colBytes)), batch: 2, actor: ingestKillActor, cfg: PublisherConfig{StepsPerFrame: 4}}
	p.rows, p.first = []int{0, 1}, first
	for range 4 {
		p.appendStep(k.g.next())
	}
	data, _ := s.encode(nil, nil, false, ingestKillActor, k.seq, 2, []int{0, 1}, first, 4, p.cols)
	f := &k.in.frame
	if err := s.Decode(data, f); err != nil {
		t.Fatal(err)
	}
	k.in.mu.Lock()
	ok := k.in.process(k.a, ackedMsg{dataMsg{data: data}}, k.seq+1, f)
	k.in.mu.Unlock()
	if !ok || k.in.Stats().Steps != int64(k.seq+1)*8 {
		t.Fatalf("frame %d not written: %+v", k.seq, k.in.Stats())
	}
	k.seq++
}

// killCapacity is the child's buffer capacity: 2 rows of 40-byte steps,
// about 1.3 MiB, so that a checkpoint takes long enough to be killed in.
const killCapacity = 16_384

func TestIngesterCheckpointKillChild(t *testing.T) {
	dir := os.Getenv(ingestKillEnv)
	if dir == "" {
		t.Skip("the ingester kill test's child process")
	}
	k := newKillIngester(t, killCapacity)
	k.ingest(t)
	if err := k.in.Checkpoint(dir, tensorbuf.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if at := os.Getenv(ingestKillAtEnv); at != "" {
		k.ingest(t)
		checkpointStage = func(stage string) {
			if stage == at {
				fmt.Println("at " + stage)
				select {} // until killed
			}
		}
		err := k.in.Checkpoint(dir, tensorbuf.SaveOptions{})
		t.Fatalf("checkpoint returned (%v) without reaching stage %q", err, at)
	}
	fmt.Println("ready")
	for {
		k.ingest(t)
		if err := k.in.Checkpoint(dir, tensorbuf.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// startKillChild starts the child on dir and returns it once it has said
// want.
func startKillChild(t *testing.T, dir, at, want string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIngesterCheckpointKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ingestKillEnv+"="+dir, ingestKillAtEnv+"="+at)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != want+"\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child said %q, want %q: %s", line, want, stderr.String())
	}
	return cmd
}

// resumeKilled loads dir's checkpoint, checks that its buffer and state
// are one pair (the actor's rows hold exactly the steps of the frames the
// state says are done, and the stream floor is the last of them), resumes
// an Ingester from it, and returns the frames it holds.
func resumeKilled(t *testing.T, js jetstream.JetStream, dir string) uint64 {
	t.Helper()
	buf, st, err := LoadCheckpoint(dir, tensorbuf.LoadOptions{})
	if err != nil {
		t.Fatalf("the checkpoint does not load: %v", err)
	}
	t.Cleanup(func() { _ = buf.Close() })
	if len(st.Actors) != 1 {
		t.Fatalf("state %+v, want one actor", st)
	}
	a := st.Actors[0]
	n := a.NextFrame
	steps := int64(n) * 4
	if a.ID != ingestKillActor || !slices.Equal(a.Rows, []int{0, 1}) || !slices.Equal(a.Next, []int64{steps, steps}) || st.StreamFloor != n ||
		buf.Cursor(0) != steps || buf.Cursor(1) != steps {
		t.Fatalf("not one pair: state %+v, buffer cursors %d %d", st, buf.Cursor(0), buf.Cursor(1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := NewIngester(ctx, IngesterConfig{JetStream: js, Buffer: buf, Resume: st})
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	in.closeActors()
	return n
}

// checkpointFiles lists dir.
func checkpointFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestIngesterCheckpointKill kills a child process while it checkpoints
// an Ingester: first at each stage of a checkpoint (after the buffer file
// is in place, after the manifest is), then at random points of repeated
// checkpoints into one directory. Every time, LoadCheckpoint and Resume
// must succeed with a consistent pair. Checkpoint used to rename
// buffer.ckpt before writing ingester.json: killed between the two, the
// new buffer and the old state did not resume ("state is not of this
// checkpoint"). TRAJRING_INGEST_KILLS sets the number of random kills
// (10).
func TestIngesterCheckpointKill(t *testing.T) {
	t.Parallel()
	if os.Getenv(ingestKillEnv) != "" {
		t.Skip("in the child")
	}
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})

	// The child checkpoints frame 0, ingests frame 1 and is killed in the
	// second checkpoint: before its manifest is in place, the first pair
	// loads; after, the second.
	for _, tc := range []struct {
		stage  string
		frames uint64
	}{
		{"buffer", 1},
		{"manifest", 2},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			dir := t.TempDir()
			cmd := startKillChild(t, dir, tc.stage, "at "+tc.stage)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if got := resumeKilled(t, js, dir); got != tc.frames {
				t.Fatalf("resumed with %d frames, want %d", got, tc.frames)
			}
		})
	}

	kills := 10
	if v, err := strconv.Atoi(os.Getenv("TRAJRING_INGEST_KILLS")); err == nil && v > 0 {
		kills = v
	}
	dir := t.TempDir()
	// Spread the kills over the first few checkpoints after the child's
	// first.
	k := newKillIngester(t, killCapacity)
	k.ingest(t)
	start := time.Now()
	if err := k.in.Checkpoint(t.TempDir(), tensorbuf.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	spread := 3*time.Since(start) + time.Millisecond
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	loaded := map[uint64]bool{}
	for range kills {
		cmd := startKillChild(t, dir, "", "ready")
		time.Sleep(time.Duration(rng.Int64N(int64(spread))))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		loaded[resumeKilled(t, js, dir)] = true
	}
	t.Logf("%d kills (spread %v), %d distinct checkpoints resumed", kills, spread, len(loaded))

	// A checkpoint after the kills leaves its own pair only: older
	// generations and the temporary files of killed saves are removed.
	buf, st, err := LoadCheckpoint(dir, tensorbuf.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := NewIngester(ctx, IngesterConfig{JetStream: js, Buffer: buf, Resume: st})
	if err != nil {
		t.Fatal(err)
	}
	defer in.closeActors()
	if err := in.Checkpoint(dir, tensorbuf.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := checkpointFiles(t, dir), []string{bufferFile(m.Generation), CheckpointManifest}; !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if m.Generation <= uint64(kills) {
		t.Fatalf("generation %d after %d children's checkpoints, want more", m.Generation, kills)
	}
}
