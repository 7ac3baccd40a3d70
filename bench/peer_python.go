package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// peersScript drives the NumPy and PyTorch peers; see its docstring.
//
//go:embed peers.py
var peersScript []byte

// trajringScript is the module peers.py imports for the "python ..."
// rows, where trajring from Python is ours (see its docstring).
//
//go:embed peer_trajring.py
var trajringScript []byte

// pyField is a field of a Python job's layout.
type pyField struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Role  string `json:"role"`
}

// pyJob is one scenario for peers.py.
type pyJob struct {
	ID           string    `json:"id"`
	Layout       string    `json:"layout"`
	Fields       []pyField `json:"fields"`
	NumEnvs      int       `json:"num_envs"`
	Capacity     int       `json:"capacity"`
	EpisodeLen   int       `json:"episode_len"`
	Kind         string    `json:"kind"`
	B            int       `json:"b"`
	L            int       `json:"l"`
	EpisodeAware bool      `json:"episode_aware,omitempty"`
	// MinOps, when set, replaces the run's minimum (slow jobs: export).
	MinOps int `json:"min_ops,omitempty"`
	// Draws names a file of int64 ring steps (native byte order), NDraws
	// operations of B each, that the peers replay instead of drawing their
	// own; Next, for transitions, the successors. Empty: own draws.
	Draws  string `json:"draws,omitempty"`
	Next   string `json:"next,omitempty"`
	NDraws int    `json:"n_draws,omitempty"`
	// K is the frames per stacked observation of a "stacked" job.
	K int `json:"k,omitempty"`
	// Trajring, when set, makes the job a "python ..." row: ours is the
	// trajring package driven from Python in peers.py's process.
	Trajring *pyTrajring `json:"trajring,omitempty"`
}

// pyTrajring is what peer_trajring.py runs as ours: Op (see its
// docstring) with the package found in Path, on Env for env ops.
type pyTrajring struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	Env  string `json:"env,omitempty"`
}

// newPyJob describes an operation over a layout's arrays.
func newPyJob(l Layout, numEnvs, capacity int, kind string, b, seqLen int) *pyJob {
	j := &pyJob{Layout: l.Name, NumEnvs: numEnvs, Capacity: capacity, EpisodeLen: EpisodeLen, Kind: kind, B: b, L: seqLen}
	for _, f := range l.Fields {
		j.Fields = append(j.Fields, pyField{Name: f.Name, DType: f.DType.String(), Shape: append([]int{}, f.Shape...), Role: f.Role.String()})
	}
	return j
}

// pyRequest is one line of peers.py's input: prepare a job (build its
// arrays and operations, warm them up), run one turn of a peer of the
// prepared job, or drop the arrays.
type pyRequest struct {
	BudgetS float64 `json:"budget_s,omitempty"`
	MinOps  int     `json:"min_ops,omitempty"`
	MaxOps  int     `json:"max_ops,omitempty"`
	Warmup  int     `json:"warmup,omitempty"`
	Prepare *pyJob  `json:"prepare,omitempty"`
	Turn    string  `json:"turn,omitempty"`
	Drop    bool    `json:"drop,omitempty"`
}

// pyHeader is peers.py's first output line.
type pyHeader struct {
	Versions map[string]string `json:"versions"`
	Skipped  []Skip            `json:"skipped"`
	Env      map[string]string `json:"env"`
}

// pyReady is peers.py's answer to a prepare request.
type pyReady struct {
	ID    string   `json:"id"`
	Ready bool     `json:"ready"`
	Peers []string `json:"peers"`
}

// pyTurn is peers.py's answer to a turn request.
type pyTurn struct {
	ID      string    `json:"id"`
	Peer    string    `json:"peer"`
	NS      []float64 `json:"ns"`
	SpentNS int64     `json:"spent_ns"`
	Error   string    `json:"error"`
}

// pyPeers runs the Python peers of one prepared job at a time, a turn at
// a time, so that the runner can give their turns in between those of
// its Go contestants. *pyWorker (peers.py) implements it; tests
// substitute their own. It is not safe for concurrent use.
type pyPeers interface {
	// prepare builds and warms up the job and names its peers.
	prepare(j *pyJob, warmup int) ([]string, error)
	// turn times one peer of the prepared job within b (b.Warmup is
	// ignored: prepare warmed it up) and returns its calls' latencies in
	// nanoseconds and the time the turn took.
	turn(peer string, b Budget) ([]float64, time.Duration, error)
	// drop frees the prepared arrays.
	drop()
	// close stops the peers.
	close()
}

// pyWorker is the running peers.py.
type pyWorker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
	script string // the directory of peers.py and peer_trajring.py
}

// findPython returns the interpreter for the peers, or "" and why not.
func findPython(want string) (string, string) {
	switch want {
	case "none":
		return "", "disabled (-python none)"
	case "":
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			return "/usr/bin/python3", ""
		}
		p, err := exec.LookPath("python3")
		if err != nil {
			return "", "no python3 found (install Debian's python3-numpy and python3-torch)"
		}
		return p, ""
	}
	return want, ""
}

// startPython starts peers.py and reads its header; it records a skip
// and returns nil when the peers cannot run.
func (r *runner) startPython(ctx context.Context) *pyWorker {
	py, why := findPython(r.opt.Python)
	if py == "" {
		r.skip("numpy and torch peers", "%s", why)
		return nil
	}
	dir, err := os.MkdirTemp("", "trajring-peers-*")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "peers.py"), peersScript, 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "peer_trajring.py"), trajringScript, 0o644)
	}
	if err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		r.skip("numpy and torch peers", "writing peers.py: %v", err)
		return nil
	}
	w := &pyWorker{stderr: new(bytes.Buffer), script: dir}
	w.cmd = exec.CommandContext(ctx, py, filepath.Join(dir, "peers.py"))
	w.cmd.Stderr = w.stderr
	w.cmd.Env = os.Environ()
	if os.Getenv("OPENBLAS_CORETYPE") == "" {
		// Debian 12's OpenBLAS 0.3.21 predates Zen 5 and may misdetect it;
		// fancy indexing uses no BLAS, this only keeps start-up sane.
		w.cmd.Env = append(w.cmd.Env, "OPENBLAS_CORETYPE=Haswell")
	}
	stdout, err := w.cmd.StdoutPipe()
	if err == nil {
		w.in, err = w.cmd.StdinPipe()
	}
	if err == nil {
		err = w.cmd.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		r.skip("numpy and torch peers", "starting %s: %v", py, err)
		return nil
	}
	w.out = bufio.NewReaderSize(stdout, 1<<20)
	var h pyHeader
	if err := w.read(&h); err != nil {
		r.skip("numpy and torch peers", "%s peers.py: %v", py, err)
		w.close()
		return nil
	}
	for k, v := range h.Versions {
		r.rep.Versions[k] = v
	}
	if v := h.Env["OPENBLAS_CORETYPE"]; v != "" {
		r.note("Python peers ran with OPENBLAS_CORETYPE=%s (no BLAS is used by the measured indexing)", v)
	}
	for _, s := range h.Skipped {
		r.skip(s.What, "%s", s.Reason)
	}
	if len(h.Skipped) > 0 && h.Skipped[0].What == "numpy and torch peers" {
		w.close()
		return nil
	}
	return w
}

func (w *pyWorker) read(v any) error {
	line, err := w.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("%w: %s", err, lastLines(w.stderr.String(), 3))
	}
	return json.Unmarshal(line, v)
}

func (w *pyWorker) send(req pyRequest) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, err = w.in.Write(append(b, '\n'))
	return err
}

func (w *pyWorker) close() {
	w.in.Close()
	w.cmd.Wait()
	os.RemoveAll(w.script)
}

func (w *pyWorker) prepare(j *pyJob, warmup int) ([]string, error) {
	var ready pyReady
	err := w.send(pyRequest{Prepare: j, Warmup: warmup})
	if err == nil {
		err = w.read(&ready)
	}
	if err == nil && (!ready.Ready || ready.ID != j.ID) {
		err = fmt.Errorf("job %s: answer %+v is not its ready line", j.ID, ready)
	}
	return ready.Peers, err
}

func (w *pyWorker) turn(peer string, b Budget) ([]float64, time.Duration, error) {
	var t pyTurn
	err := w.send(pyRequest{Turn: peer, BudgetS: b.Time.Seconds(), MinOps: b.MinOps, MaxOps: b.MaxOps})
	if err == nil {
		err = w.read(&t)
	}
	switch {
	case err != nil:
	case t.Error != "":
		err = fmt.Errorf("turn of %s: %s", peer, t.Error)
	case t.Peer != peer || len(t.NS) == 0:
		err = fmt.Errorf("turn of %s: answered for %q with %d calls", peer, t.Peer, len(t.NS))
	}
	if err != nil {
		return nil, 0, err
	}
	return t.NS, time.Duration(t.SpentNS), nil
}

func (w *pyWorker) drop() {
	var dropped map[string]any
	if err := w.send(pyRequest{Drop: true}); err == nil {
		w.read(&dropped)
	}
}

// preparePython starts peers.py if needed and prepares the scenario's
// job, with the scenario's draws written to files; it returns the job's
// peers (none when there is no Python job or the peers cannot run) and a
// cleanup that removes the files.
func (r *runner) preparePython(sc *scenario, per Budget) ([]string, func()) {
	nop := func() {}
	if sc.py == nil || r.pyDead {
		return nil, nop
	}
	if r.py == nil {
		w := r.startPython(context.Background())
		if w == nil {
			r.pyDead = true
			return nil, nop
		}
		r.py = w
	}
	j := *sc.py
	j.ID = fmt.Sprintf("%d", len(r.rep.Rows))
	var files []string
	cleanup := func() {
		for _, f := range files {
			os.Remove(f)
		}
	}
	if len(sc.pyIdx) > 0 {
		var err error
		if j.Draws, err = writeDraws(sc.pyIdx); err == nil {
			files = append(files, j.Draws)
			if len(sc.pyNext) > 0 {
				j.Next, err = writeDraws(sc.pyNext)
				files = append(files, j.Next)
			}
		}
		if err != nil {
			cleanup()
			r.skip("numpy and torch peers (from "+sc.row.Scenario+" on)", "writing draws: %v", err)
			r.pyDead = true
			return nil, nop
		}
		j.NDraws = len(sc.pyIdx)
	}
	warm := per.Warmup
	if j.MinOps > 0 {
		warm = 1
	}
	peers, err := r.py.prepare(&j, warm)
	if err != nil {
		cleanup()
		r.pythonFailed(sc, err)
		return nil, nop
	}
	return peers, cleanup
}

// pythonBudget is a Python peer's budget for a round: per, with the
// job's own minimum (slow jobs: export) split over the rounds.
func (r *runner) pythonBudget(sc *scenario, per Budget) Budget {
	if sc.py.MinOps > 0 {
		per.MinOps = max(1, sc.py.MinOps/r.rounds)
	}
	return per
}

func (r *runner) pythonFailed(sc *scenario, err error) {
	r.skip("numpy and torch peers (from "+sc.row.Scenario+" on)", "peers.py: %v", err)
	r.py.close()
	r.py, r.pyDead = nil, true
}

// dropPython lets peers.py free its arrays (at the end of a group).
func (r *runner) dropPython() {
	if r.py != nil {
		r.py.drop()
	}
}

// writeDraws writes draws as int64s in native byte order to a temporary
// file and returns its name.
func writeDraws(draws [][]int64) (string, error) {
	f, err := os.CreateTemp("", "trajring-draws-*.bin")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b [8]byte
	for _, d := range draws {
		for _, v := range d {
			binary.NativeEndian.PutUint64(b[:], uint64(v))
			w.Write(b[:])
		}
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}
