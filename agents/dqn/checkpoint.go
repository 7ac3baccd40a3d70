package dqn

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/tensorbuf"
)

// ErrNoCheckpoint reports a resume from a directory that holds no
// checkpoint (no manifest).
var ErrNoCheckpoint = errors.New("dqn: no checkpoint to resume from")

// Checkpoint files in TrainConfig.CheckpointDir. Generation g writes
// ReplayFile(g) (the replay buffer and its table: tensorbuf.SaveFile),
// then StateFile(g) (everything else), then the manifest naming both,
// each atomically (a temporary file, fsynced, renamed over the old one,
// the directory fsynced). The manifest is the commit point: a process
// killed at any moment of a save leaves the previous manifest, which
// names the previous generation's files, still present and whole; only
// after the new manifest is in place are older generations' files
// removed. A resume reads the manifest, checks the state file's size and
// CRC-32C (the replay file carries its own checksums) and loads both.
const (
	ManifestFile   = "checkpoint.json"
	manifestFormat = "trajring-dqn-checkpoint/1"
	loopFormat     = "trajring-dqn-train-state/2"
	// loopFormatV1 states (before best networks and learning-rate
	// schedules) still load: their runs had a constant learning rate, and
	// -1 stood for "no evaluation".
	loopFormatV1 = "trajring-dqn-train-state/1"
)

// ReplayFile and StateFile name generation gen's files.
func ReplayFile(gen uint64) string { return fmt.Sprintf("replay-%06d.ckpt", gen) }

// StateFile names generation gen's learner state file; see ReplayFile.
func StateFile(gen uint64) string { return fmt.Sprintf("state-%06d.gob", gen) }

// manifest is checkpoint.json.
type manifest struct {
	Format      string `json:"format"`
	Generation  uint64 `json:"generation"`
	EnvSteps    int64  `json:"env_steps"`
	Replay      string `json:"replay"`
	ReplayBytes int64  `json:"replay_bytes"`
	State       string `json:"state"`
	StateBytes  int64  `json:"state_bytes"`
	StateCRC    uint32 `json:"state_crc32c"`
}

// loopState is the learner's state besides the replay buffer.
type loopState struct {
	Format string
	// Config is the run's configuration, defaults and the env's sizes
	// filled in (gob skips its func fields).
	Config      TrainConfig
	Progress    Progress
	FirstSolved int64
	Evals       int64 // evaluations run so far (each on its own seed)
	Returns     returnWindow
	History     []Progress // every round's Progress, for the curve
	Agent       []byte     // Agent.SaveState
	Policy      []byte     // EpsilonGreedyPolicy.MarshalBinary
	// Best is the best-evaluated network so far (Network.Save; nil when
	// none), found at BestEnvSteps with mean return BestEvalReturn.
	Best           []byte
	BestEnvSteps   int64
	BestEvalReturn float64
	Stopped        bool // an evaluation reached StopOnReturn: the run is complete
}

// Checkpoint describes a run's newest checkpoint (ReadCheckpoint). A
// plain value.
type Checkpoint struct {
	Generation uint64
	// Config is the configuration of the run that wrote it, defaults
	// filled in; Progress its state at the checkpoint and History every
	// training round's up to it.
	Config   TrainConfig
	Progress Progress
	History  []Progress
	// ReplayPath is the replay buffer's checkpoint (see trajring
	// inspect); StatePath the learner state.
	ReplayPath, StatePath string
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readManifest reads dir's manifest; ErrNoCheckpoint when there is none.
func readManifest(dir string) (manifest, error) {
	var m manifest
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("%w: %s has no %s", ErrNoCheckpoint, dir, ManifestFile)
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Format != manifestFormat || m.Generation == 0 ||
		m.Replay != ReplayFile(m.Generation) || m.State != StateFile(m.Generation) {
		return m, fmt.Errorf("%w: %s is not a %s manifest", tensorbuf.ErrCorrupt, filepath.Join(dir, ManifestFile), manifestFormat)
	}
	return m, nil
}

// nextGeneration is one past the generation of dir's manifest (1 when
// there is none), so that a save never overwrites the files the current
// manifest names.
func nextGeneration(dir string) uint64 {
	m, err := readManifest(dir)
	if err != nil {
		return 1
	}
	return m.Generation + 1
}

// saveCheckpoint writes generation gen (see ManifestFile) and removes
// older generations' files.
func saveCheckpoint(dir string, gen uint64, buf *tensorbuf.Buffer, st *loopState, compress bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	m := manifest{Format: manifestFormat, Generation: gen, EnvSteps: st.Progress.EnvSteps, Replay: ReplayFile(gen), State: StateFile(gen)}
	if err := buf.SaveFile(filepath.Join(dir, m.Replay), tensorbuf.SaveOptions{Compress: compress}); err != nil {
		return fmt.Errorf("checkpoint: replay buffer: %w", err)
	}
	fi, err := os.Stat(filepath.Join(dir, m.Replay))
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	m.ReplayBytes = fi.Size()
	var sb bytes.Buffer
	if err := gob.NewEncoder(&sb).Encode(st); err != nil {
		return fmt.Errorf("checkpoint: encoding the learner state: %w", err)
	}
	m.StateBytes, m.StateCRC = int64(sb.Len()), crc32.Checksum(sb.Bytes(), castagnoli)
	if err := atomicfile.WriteBytes(filepath.Join(dir, m.State), sb.Bytes()); err != nil {
		return fmt.Errorf("checkpoint: learner state: %w", err)
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ManifestFile), append(mj, '\n')); err != nil {
		return fmt.Errorf("checkpoint: manifest: %w", err)
	}
	// Committed: older generations (and temporary files of killed saves)
	// go. A failure here leaves only garbage, so it is not an error.
	for _, pat := range []string{"replay-*.ckpt", "state-*.gob", ".replay-*.tmp-*", ".state-*.tmp-*", "." + ManifestFile + ".tmp-*"} {
		old, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, p := range old {
			if b := filepath.Base(p); b != m.Replay && b != m.State {
				_ = os.Remove(p)
			}
		}
	}
	return nil
}

// readState reads and checks the learner state the manifest names.
func readState(dir string, m manifest) (*loopState, error) {
	path := filepath.Join(dir, m.State)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if int64(len(data)) != m.StateBytes || crc32.Checksum(data, castagnoli) != m.StateCRC {
		return nil, fmt.Errorf("%w: %s: %d bytes or checksum differ from the manifest's", tensorbuf.ErrCorrupt, path, len(data))
	}
	st := new(loopState)
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(st); err != nil || (st.Format != loopFormat && st.Format != loopFormatV1) {
		return nil, fmt.Errorf("%w: %s: not a %s file", tensorbuf.ErrCorrupt, path, loopFormat)
	}
	if st.Format == loopFormatV1 {
		st.Format = loopFormat
		st.Config.LearningRateEnd = st.Config.Agent.LearningRate
		st.BestEnvSteps = -1
		fixV1 := func(p *Progress) {
			p.LearningRate = st.Config.Agent.LearningRate
			if p.EvalReturn != nil && *p.EvalReturn < 0 {
				p.EvalReturn = nil
			}
		}
		fixV1(&st.Progress)
		for i := range st.History {
			fixV1(&st.History[i])
		}
	}
	return st, nil
}

// ReadCheckpoint reads and checks the manifest and learner state of dir's
// newest checkpoint (not the replay buffer: see tensorbuf.ReadCheckpointInfo
// for its summary). It fails with ErrNoCheckpoint when dir holds none, and
// with tensorbuf.ErrCorrupt when a file is damaged. It is safe for
// concurrent use.
func ReadCheckpoint(dir string) (*Checkpoint, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	st, err := readState(dir, m)
	if err != nil {
		return nil, err
	}
	return &Checkpoint{
		Generation: m.Generation, Config: st.Config, Progress: st.Progress, History: st.History,
		ReplayPath: filepath.Join(dir, m.Replay), StatePath: filepath.Join(dir, m.State),
	}, nil
}

// configDiff lists the configuration fields that differ between saved
// and now among those that must be equal to resume: all but Steps, the
// evaluation settings, the callbacks and the checkpoint settings.
func configDiff(saved, now TrainConfig) []string {
	var diffs []string
	sv, nv := reflect.ValueOf(saved), reflect.ValueOf(now)
	for i := range sv.NumField() {
		f := sv.Type().Field(i)
		switch f.Name {
		case "Steps", "EvalEpisodes", "EvalEvery", "Progress", "OnResume", "Observers", "Interrupt", "CheckpointDir", "CheckpointEvery", "CheckpointCompress", "Resume":
			continue
		}
		if !f.IsExported() {
			continue
		}
		if f.Name == "Backend" {
			if a, b := LearnerBackend(saved.Backend), LearnerBackend(now.Backend); a != b {
				diffs = append(diffs, fmt.Sprintf("Backend %s (now %s)", a, b))
			}
			continue
		}
		if f.Name == "Agent" {
			a, b := saved.Agent, now.Agent
			at := reflect.TypeOf(a)
			for j := range at.NumField() {
				if !reflect.DeepEqual(reflect.ValueOf(a).Field(j).Interface(), reflect.ValueOf(b).Field(j).Interface()) {
					diffs = append(diffs, fmt.Sprintf("Agent.%s %v (now %v)", at.Field(j).Name,
						reflect.ValueOf(a).Field(j).Interface(), reflect.ValueOf(b).Field(j).Interface()))
				}
			}
			continue
		}
		if !reflect.DeepEqual(sv.Field(i).Interface(), nv.Field(i).Interface()) {
			diffs = append(diffs, fmt.Sprintf("%s %v (now %v)", f.Name, sv.Field(i).Interface(), nv.Field(i).Interface()))
		}
	}
	return diffs
}

func checkResumeConfig(saved, now TrainConfig) error {
	if d := configDiff(saved, now); len(d) > 0 {
		return fmt.Errorf("%w: resume: the configuration differs from the checkpoint's: %s", ErrConfig, strings.Join(d, "; "))
	}
	return nil
}

// returnWindow is the mean undiscounted return of the last K training
// episodes, as observer.AverageReturn (TF-Agents' AverageReturnMetric)
// computes it, with its state in the open for checkpoints.
type returnWindow struct {
	Acc  []float64 // per row: the return of the episode in progress
	Vals []float64 // the last K returns, a ring
	Next int
	N    int
}

func newReturnWindow(rows, k int) returnWindow {
	return returnWindow{Acc: make([]float64, rows), Vals: make([]float64, k)}
}

// Observe accumulates rewards per row and records the return of every
// episode the trajectory ends.
func (w *returnWindow) Observe(t *driver.Trajectory) error {
	if t == nil || len(t.StepType) != len(w.Acc) || len(t.Reward) != len(w.Acc) || len(t.NextStepType) != len(w.Acc) {
		return fmt.Errorf("%w: return window of %d rows given a trajectory of another size", ErrConfig, len(w.Acc))
	}
	for i := range w.Acc {
		if !t.IsActive(i) {
			continue
		}
		if t.StepType[i] == tensorbuf.First {
			w.Acc[i] = 0
		}
		w.Acc[i] += float64(t.Reward[i])
		if t.NextStepType[i] == tensorbuf.Last {
			w.Vals[w.Next] = w.Acc[i]
			w.Next = (w.Next + 1) % len(w.Vals)
			w.N = min(w.N+1, len(w.Vals))
		}
	}
	return nil
}

// Result is the mean of the returns held (0 before any episode ended).
func (w *returnWindow) Result() float64 {
	if w.N == 0 {
		return 0
	}
	var s float64
	for _, v := range w.Vals[:w.N] {
		s += v
	}
	return s / float64(w.N)
}
