package remote

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/tensorbuf"
)

// The process benchmark: actors are separate processes, as on many
// machines. Each actor process is this test binary re-executed into
// TestBenchChild (not `trajring actor`, which steps CartPole: its 4-float
// observation has no 3 KB counterpart, and its environment steps would be
// measured along with the ingest). The child publishes the same generated
// trajectories (newGenWidth) through a Publisher as the goroutine
// benchmark, or, for the raw yardstick, copies of one frame of the same
// bytes with plain async publishes: both sides of the comparison pay for
// processes alike. Children connect first and say "ready"; the clock
// starts when the parent tells them all to go.

// Environment of a benchmark child.
const (
	childEnv      = "TRAJRING_BENCH_CHILD" // "actor" or "raw"
	childURL      = "TRAJRING_BENCH_URL"
	childWidth    = "TRAJRING_BENCH_WIDTH" // observation floats
	childN        = "TRAJRING_BENCH_N"     // batched steps (actor) or frames (raw)
	childIndex    = "TRAJRING_BENCH_INDEX"
	childDeadline = 120 * time.Second
)

// TestIngestProcesses (TRAJRING_REMOTE_BENCH_PROCS=1, or a comma list of
// cells such as "low-dim/1,3 KB/4") measures, for 1, 2 and 4 actor
// processes and low-dim and 3 KB steps: the steps/s and MB/s the Ingester
// writes into a buffer from a file-backed stream on an embedded server
// (127.0.0.1, a random port); a raw JetStream publish/consume of the same
// number of frames of the same bytes from as many processes, in the same
// run; and in-process collection. It prints a table with the ratios.
// Every wait has a deadline. TRAJRING_BENCH_SCALE=N (2-16) measures N
// times as many steps; TRAJRING_BENCH_PROFILE=dir writes CPU profiles of
// this process per measurement and of every child there.
func TestIngestProcesses(t *testing.T) {
	runBenchCells(t, "TRAJRING_REMOTE_BENCH_PROCS", "actor processes", procCell)
}

// child is a running benchmark child process.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	bytes int64 // published frame bytes, from its "done" line
}

// startChildren starts n children of the given mode, each publishing
// ns[i] batched steps or frames, and waits until each has connected.
func startChildren(t *testing.T, ctx context.Context, mode, url string, width int, ns []int64) []*child {
	t.Helper()
	var cs []*child
	for i, n := range ns {
		args := []string{"-test.run=^TestBenchChild$", "-test.count=1"}
		if d := os.Getenv("TRAJRING_BENCH_PROFILE"); d != "" {
			args = append(args, fmt.Sprintf("-test.cpuprofile=%s/child-%s-%d-%d.prof", d, mode, len(ns), i))
		}
		cmd := exec.CommandContext(ctx, os.Args[0], args...)
		cmd.Env = append(os.Environ(), childEnv+"="+mode, childURL+"="+url, childWidth+"="+strconv.Itoa(width),
			childN+"="+strconv.FormatInt(n, 10), childIndex+"="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		cs = append(cs, c)
	}
	for i, c := range cs {
		if line := c.line(); line != "ready" {
			t.Fatalf("%s child %d: %q, want ready", mode, i, line)
		}
	}
	return cs
}

// line returns the child's next "BENCHCHILD " line without the prefix
// ("" at the end of its output).
func (c *child) line() string {
	for c.out.Scan() {
		if s, ok := strings.CutPrefix(c.out.Text(), "BENCHCHILD "); ok {
			return s
		}
	}
	return ""
}

// goAll tells every child to start publishing.
func goAll(t *testing.T, cs []*child) {
	for _, c := range cs {
		if _, err := io.WriteString(c.in, "go\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.in.Close()
	}
}

// finish waits for every child's "done" line and exit.
func finish(t *testing.T, cs []*child) {
	t.Helper()
	for i, c := range cs {
		line := c.line()
		if _, err := fmt.Sscanf(line, "done bytes=%d", &c.bytes); err != nil {
			t.Fatalf("child %d: %q, want done bytes=N", i, line)
		}
		for c.out.Scan() { // the rest of its output, before Wait closes the pipe
		}
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
}

// procCell runs the three measurements of one cell on a fresh server.
func procCell(t *testing.T, sh benchShape, actors int) benchResult {
	dir, err := os.MkdirTemp("", "trajring-bench-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := startServer(t, dir, freePorts(t, 1)[0])
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{MaxBytes: 8 << 30})
	fields := benchFields(sh.width)
	steps := sh.steps
	if v, err := strconv.Atoi(os.Getenv("TRAJRING_BENCH_SCALE")); err == nil && v > 1 && v <= 16 {
		steps *= int64(v) // longer measurements (the buffer is a ring: its size stays)
	}
	perActor := steps / int64(actors) / (benchRows * benchK) * benchK
	total := perActor * benchRows * int64(actors)
	frames := int(total / (benchRows * benchK))
	r := benchResult{shape: sh.name, actors: actors}
	ctx, cancel := context.WithTimeout(context.Background(), childDeadline)
	defer cancel()

	// Remote: actor processes -> JetStream (file) -> Ingester -> buffer.
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: benchRows * actors, Capacity: sh.cap, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	in, stop := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf})
	cs := startChildren(t, ctx, "actor", srv.ClientURL(), sh.width, slices.Repeat([]int64{perActor}, actors))
	stopProf := profile(t, fmt.Sprintf("remote-%s-%d", strings.ReplaceAll(sh.name, " ", ""), actors))
	start, cpu0 := time.Now(), cpuTime()
	goAll(t, cs)
	waitFor(t, 60*time.Second, fmt.Sprintf("%s, %d actor processes: %d steps ingested (stats %+v)", sh.name, actors, total, in.Stats()),
		func() bool { return in.Stats().Steps >= total })
	wall := time.Since(start)
	r.remote = float64(total) / wall.Seconds()
	cpuRemote := cpuTime() - cpu0
	stopProf()
	stop()
	finish(t, cs)
	t.Logf("remote: %v wall, learner process (server + ingester) %v CPU, actor processes %v CPU", wall.Round(time.Millisecond), cpuRemote.Round(time.Millisecond), childCPU(cs).Round(time.Millisecond))
	var bytes int64
	for _, c := range cs {
		bytes += c.bytes
	}
	if st := in.Stats(); st.Steps != total || st.Duplicates != 0 || st.Dead != 0 {
		t.Fatalf("ingested %+v, want %d steps, no duplicates, nothing dead", st, total)
	}
	r.stepBytes = float64(bytes) / float64(total)
	s, err := NewSchema(fields)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := s.encode(nil, nil, false, 1, 0, benchRows, []int{0, 1, 2, 3, 4, 5, 6, 7}, make([]int64, benchRows), benchK, fullCols(s, benchRows, benchK))
	if int64(len(frame))*int64(frames) != bytes {
		t.Fatalf("frames of %d bytes, published %d bytes in %d frames", len(frame), bytes, frames)
	}

	// Raw JetStream: as many processes publish the same number of frames
	// of the same bytes; this process consumes them.
	ns := make([]int64, actors)
	for a := range ns {
		ns[a] = int64(frames / actors)
	}
	ns[actors-1] += int64(frames % actors)
	rc := newRawConsumer(t, ctx, js, frames)
	cs = startChildren(t, ctx, "raw", srv.ClientURL(), sh.width, ns)
	stopProf = profile(t, fmt.Sprintf("raw-%s-%d", strings.ReplaceAll(sh.name, " ", ""), actors))
	start, cpu0 = time.Now(), cpuTime()
	goAll(t, cs)
	rc.wait(t)
	wall = time.Since(start)
	r.raw = float64(total) / wall.Seconds()
	cpuRaw := cpuTime() - cpu0
	stopProf()
	finish(t, cs)
	t.Logf("raw: %v wall, consumer process (server + consumer) %v CPU, publisher processes %v CPU", wall.Round(time.Millisecond), cpuRaw.Round(time.Millisecond), childCPU(cs).Round(time.Millisecond))

	// In-process: the same trajectories through observer.Shared.
	r.proc = inProcess(t, sh, actors, perActor, total)
	t.Logf("%s, %d actor processes: remote %.0f steps/s, raw %.0f, in-process %.0f", sh.name, actors, r.remote, r.raw, r.proc)
	return r
}

// profile writes this process's CPU profile of one measurement to
// $TRAJRING_BENCH_PROFILE/name.prof when that directory is given (the
// children's go next to it, see startChildren); call the returned func at
// the measurement's end.
func profile(t *testing.T, name string) func() {
	d := os.Getenv("TRAJRING_BENCH_PROFILE")
	if d == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(d, name+".prof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

// childCPU returns the CPU time of exited children.
func childCPU(cs []*child) time.Duration {
	var d time.Duration
	for _, c := range cs {
		d += c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()
	}
	return d
}

// rawConsumer consumes a raw stream of frames with a durable pull
// consumer, acknowledging each message as the Ingester does.
type rawConsumer struct {
	frames int
	got    atomic.Int64
	done   chan struct{}
	it     jetstream.MessagesContext
	clean  func()
}

func newRawConsumer(t *testing.T, ctx context.Context, js jetstream.JetStream, frames int) *rawConsumer {
	t.Helper()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "RAW", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxBytes(32 << 20)) // as the Ingester
	if err != nil {
		t.Fatal(err)
	}
	stopIt := context.AfterFunc(ctx, it.Stop) // the deadline ends Next
	rc := &rawConsumer{frames: frames, done: make(chan struct{}), it: it}
	rc.clean = func() {
		stopIt()
		it.Stop()
		_ = js.DeleteStream(context.Background(), "RAW")
	}
	t.Cleanup(rc.clean)
	go func() {
		defer close(rc.done)
		for rc.got.Load() < int64(frames) {
			m, err := it.Next()
			if err != nil {
				return
			}
			_ = m.Ack()
			rc.got.Add(1)
		}
	}()
	return rc
}

// wait waits until every frame is consumed (or the deadline).
func (rc *rawConsumer) wait(t *testing.T) {
	t.Helper()
	<-rc.done
	rc.it.Stop()
	if n := rc.got.Load(); n != int64(rc.frames) {
		t.Fatalf("raw JetStream: consumed %d of %d messages before the deadline", n, rc.frames)
	}
}

// inProcess returns the steps/s of the actors' trajectories written
// through observer.Shared in this process.
func inProcess(t *testing.T, sh benchShape, actors int, perActor, total int64) float64 {
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: benchRows * actors, Capacity: sh.cap, Fields: benchFields(sh.width)})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	start := time.Now()
	var wg sync.WaitGroup
	for a := range actors {
		wg.Go(func() {
			rows := make([]int, benchRows)
			for i := range rows {
				rows[i] = a*benchRows + i
			}
			o, err := PlainObserver(buf, rows)
			if err != nil {
				t.Error(err)
				return
			}
			defer o.Close()
			g := newGenWidth(benchRows, sh.width)
			for range perActor {
				if err := o.Observe(g.next()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	proc := float64(total) / time.Since(start).Seconds()
	if got := buf.Stats().Steps; got != total {
		t.Fatalf("in-process wrote %d steps, want %d", got, total)
	}
	return proc
}

// TestBenchChild is a benchmark child (see TestIngestProcesses): it runs
// only when TRAJRING_BENCH_CHILD is set.
func TestBenchChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("a benchmark child process (TestIngestProcesses starts it)")
	}
	width, err1 := strconv.Atoi(os.Getenv(childWidth))
	n, err2 := strconv.ParseInt(os.Getenv(childN), 10, 64)
	idx, err3 := strconv.Atoi(os.Getenv(childIndex))
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("bad child environment: %v %v %v", err1, err2, err3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), childDeadline)
	defer cancel()
	_, js := connect(t, os.Getenv(childURL))
	fields := benchFields(width)
	fmt.Println("BENCHCHILD ready")
	if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); line != "go\n" {
		t.Fatalf("child: %q, want go", line)
	}
	var bytes int64
	switch mode {
	case "actor":
		p, err := NewPublisher(PublisherConfig{JetStream: js, Fields: fields, StepsPerFrame: benchK, MaxInFlight: 256, Context: ctx})
		if err != nil {
			t.Fatal(err)
		}
		g := newGenWidth(benchRows, width)
		for range n {
			if err := p.Observe(g.next()); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		bytes = p.Stats().Bytes
	case "raw":
		s, err := NewSchema(fields)
		if err != nil {
			t.Fatal(err)
		}
		frame, _ := s.encode(nil, nil, false, 1, 0, benchRows, []int{0, 1, 2, 3, 4, 5, 6, 7}, make([]int64, benchRows), benchK, fullCols(s, benchRows, benchK))
		bytes = rawPublish(t, ctx, js, idx, int(n), frame)
	default:
		t.Fatalf("child mode %q", mode)
	}
	fmt.Printf("BENCHCHILD done bytes=%d\n", bytes)
}

// rawPublish publishes n copies of frame to raw.<idx>, async, each with a
// message id, at most 256 and defaultMaxInFlightBytes in flight (as the
// Publisher), and returns the bytes published.
func rawPublish(t *testing.T, ctx context.Context, js jetstream.JetStream, idx, n int, frame []byte) int64 {
	var queue []jetstream.PubAckFuture
	wait := func() {
		select {
		case <-queue[0].Ok():
		case err := <-queue[0].Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		queue = queue[1:]
	}
	for i := range n {
		for len(queue) >= 256 || (len(queue) > 0 && (len(queue)+1)*len(frame) > defaultMaxInFlightBytes) {
			wait()
		}
		f, err := js.PublishAsync(fmt.Sprintf("raw.%d", idx), frame, jetstream.WithMsgID(fmt.Sprintf("%d-%d", idx, i)))
		if err != nil {
			t.Fatal(err)
		}
		queue = append(queue, f)
	}
	for len(queue) > 0 {
		wait()
	}
	return int64(n) * int64(len(frame))
}
