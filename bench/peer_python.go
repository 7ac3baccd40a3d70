package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// peersScript drives the NumPy and PyTorch peers; see its docstring.
//
//go:embed peers.py
var peersScript []byte

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
}

// newPyJob describes an operation over a layout's arrays.
func newPyJob(l Layout, numEnvs, capacity int, kind string, b, seqLen int) *pyJob {
	j := &pyJob{Layout: l.Name, NumEnvs: numEnvs, Capacity: capacity, EpisodeLen: EpisodeLen, Kind: kind, B: b, L: seqLen}
	for _, f := range l.Fields {
		j.Fields = append(j.Fields, pyField{Name: f.Name, DType: f.DType.String(), Shape: append([]int{}, f.Shape...), Role: f.Role.String()})
	}
	return j
}

// pySpec is peers.py's input.
type pySpec struct {
	BudgetS float64 `json:"budget_s"`
	MinOps  int     `json:"min_ops"`
	MaxOps  int     `json:"max_ops"`
	Rounds  int     `json:"rounds"`
	Jobs    []pyJob `json:"jobs"`
}

// pyOutput is peers.py's output.
type pyOutput struct {
	Versions map[string]string `json:"versions"`
	Skipped  []Skip            `json:"skipped"`
	Env      map[string]string `json:"env"`
	Results  []struct {
		ID   string    `json:"id"`
		Peer string    `json:"peer"`
		NS   []float64 `json:"ns"`
	} `json:"results"`
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

// pythonPeers runs every queued Python job in one subprocess and merges
// its results into the rows by job id.
func (r *runner) pythonPeers(ctx context.Context) error {
	if len(r.jobs) == 0 {
		return nil
	}
	py, why := findPython(r.opt.Python)
	if py == "" {
		r.skip("numpy and torch peers", "%s", why)
		return nil
	}
	fmt.Fprintf(r.opt.Progress, "\rbench: numpy/torch peers: %d jobs (%s)%s", len(r.jobs), time.Since(r.start).Round(100*time.Millisecond), clearEOL)
	spec := pySpec{BudgetS: r.bud.Time.Seconds(), MinOps: r.bud.MinOps, MaxOps: r.bud.MaxOps, Rounds: r.rounds, Jobs: r.jobs}
	in, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "trajring-peers-*.py")
	if err != nil {
		return fmt.Errorf("bench: peers script: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(peersScript); err != nil {
		f.Close()
		return fmt.Errorf("bench: peers script: %w", err)
	}
	f.Close()
	cmd := exec.CommandContext(ctx, py, f.Name())
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Env = os.Environ()
	if os.Getenv("OPENBLAS_CORETYPE") == "" {
		// Debian 12's OpenBLAS 0.3.21 predates Zen 5 and may misdetect it;
		// fancy indexing uses no BLAS, this only keeps start-up sane.
		cmd.Env = append(cmd.Env, "OPENBLAS_CORETYPE=Haswell")
	}
	if err := cmd.Run(); err != nil {
		r.skip("numpy and torch peers", "%s failed: %v: %s", py, err, lastLines(stderr.String(), 3))
		return nil
	}
	var res pyOutput
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		r.skip("numpy and torch peers", "bad output from peers.py: %v", err)
		return nil
	}
	return r.mergePython(&res)
}

// mergePython adds peers.py's results to the rows.
func (r *runner) mergePython(res *pyOutput) error {
	for k, v := range res.Versions {
		r.rep.Versions[k] = v
	}
	if v := res.Env["OPENBLAS_CORETYPE"]; v != "" {
		r.note("Python peers ran with OPENBLAS_CORETYPE=%s (no BLAS is used by the measured indexing)", v)
	}
	r.rep.Skipped = append(r.rep.Skipped, res.Skipped...)
	for _, x := range res.Results {
		i, err := strconv.Atoi(x.ID)
		if err != nil || i < 0 || i >= len(r.rep.Rows) {
			return fmt.Errorf("bench: peers.py returned unknown job %q", x.ID)
		}
		s, err := Summarise(x.NS)
		if err != nil {
			continue
		}
		s.AllocsPerOp = -1 // not measured in Python
		r.rep.Rows[i].Peers = append(r.rep.Rows[i].Peers, PeerResult{Name: x.Peer, Stats: s})
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}
