package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/tensorbuf"
)

// State is what an Ingester must remember across a restart, next to a
// buffer checkpoint: which rows each actor owns, the next step expected
// of each of its rows, the buffer cursors it saw (to detect a state that
// does not belong to the checkpoint) and the stream sequence up to which
// every frame is in the checkpoint. It is a plain value (JSON).
type State struct {
	Actors      []ActorState `json:"actors"`
	Cursors     []int64      `json:"cursors"`
	StreamFloor uint64       `json:"stream_floor"`
}

// ActorState is one actor's part of a State: its rows, the next step
// expected of each, and the sequence number of the next frame expected
// (NextFrame 0 with steps in Next, as in states saved before frames were
// reordered, means unknown: the first frame that skips no step is taken
// as the next one).
type ActorState struct {
	ID        uint64  `json:"id"`
	Rows      []int   `json:"rows"`
	Next      []int64 `json:"next"`
	NextFrame uint64  `json:"next_frame"`
}

// State returns the ingester's state between two frames.
func (in *Ingester) State() State {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stateLocked()
}

func (in *Ingester) stateLocked() State {
	s := State{StreamFloor: in.streamFloor()}
	for _, a := range in.actors {
		as := ActorState{ID: a.id, Rows: slices.Clone(a.rows), Next: slices.Clone(a.next)}
		if a.seqKnown {
			as.NextFrame = a.nextFrame
		}
		s.Actors = append(s.Actors, as)
	}
	slices.SortFunc(s.Actors, func(a, b ActorState) int { return a.Rows[0] - b.Rows[0] })
	for r := range in.cfg.Buffer.NumEnvs() {
		s.Cursors = append(s.Cursors, in.cfg.Buffer.Cursor(r))
	}
	return s
}

// restore takes the actors of a saved state.
func (in *Ingester) restore(s *State) error {
	b := in.cfg.Buffer
	if len(s.Cursors) != b.NumEnvs() {
		return fmt.Errorf("%w: state of %d rows for a buffer of %d", ErrConfig, len(s.Cursors), b.NumEnvs())
	}
	for r, c := range s.Cursors {
		if b.Cursor(r) != c {
			return fmt.Errorf("%w: state is not of this checkpoint: row %d cursor %d, state says %d", ErrConfig, r, b.Cursor(r), c)
		}
	}
	for _, as := range s.Actors {
		if len(as.Rows) == 0 || len(as.Next) != len(as.Rows) {
			return fmt.Errorf("%w: actor %016x: %d rows, %d step numbers", ErrConfig, as.ID, len(as.Rows), len(as.Next))
		}
		a := &actorState{id: as.ID, rows: slices.Clone(as.Rows), next: slices.Clone(as.Next), nextFrame: as.NextFrame, seen: time.Now()}
		a.seqKnown = as.NextFrame > 0 || !slices.ContainsFunc(as.Next, func(n int64) bool { return n > 0 })
		for _, r := range a.rows {
			i := slices.Index(in.cfg.Rows, r)
			if i < 0 || !in.free[i] {
				return fmt.Errorf("%w: actor %016x: row %d not available", ErrConfig, as.ID, r)
			}
			in.free[i] = false
		}
		if err := in.open(a); err != nil {
			return err
		}
		in.actors[a.id] = a
	}
	in.ro.floor = s.StreamFloor
	return nil
}

// Checkpoint files. Generation g of a checkpoint is the buffer, in
// bufferFile(g) (tensorbuf.SaveFile), and the manifest CheckpointManifest,
// which names that file and holds the ingester's State; each is written
// atomically (a synced temporary file renamed into place, the directory
// synced), the buffer first. The manifest's rename is the commit point: a
// process killed at any moment of a checkpoint leaves the previous
// manifest, and the buffer file it names, in place; older generations
// are removed only after the new manifest is in place. Directories of the
// earlier layout (ingester.json holding the State alone, next to
// buffer.ckpt) still load.
const (
	// CheckpointManifest is the file whose presence says that a directory
	// holds an ingester checkpoint (see Ingester.Checkpoint).
	CheckpointManifest = "ingester.json"
	manifestFormat     = "trajring-ingester-checkpoint/1"
	legacyBufferFile   = "buffer.ckpt"
)

// bufferFile names generation gen's buffer file.
func bufferFile(gen uint64) string { return fmt.Sprintf("buffer-%06d.ckpt", gen) }

// manifest is CheckpointManifest's content.
type manifest struct {
	Format      string `json:"format"`
	Generation  uint64 `json:"generation"`
	Buffer      string `json:"buffer"`
	BufferBytes int64  `json:"buffer_bytes"`
	State       *State `json:"state"`
}

// checkpointStage, when set (tests), is called as each file of a
// checkpoint is in place ("buffer", then "manifest"), so that a test can
// kill the process there.
var checkpointStage func(stage string)

// Checkpoint saves the buffer and the ingester's state as one pair into
// dir, which must exist, between two frames (ingestion pauses meanwhile):
// a crash or error at any point leaves the previous pair loadable (see
// CheckpointManifest). Resume with LoadCheckpoint and
// IngesterConfig.Resume. One ingester checkpoints into a directory at a
// time: a checkpoint removes the files of older ones.
func (in *Ingester) Checkpoint(dir string, opts tensorbuf.SaveOptions) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := in.stateLocked()
	gen := nextGeneration(dir)
	m := manifest{Format: manifestFormat, Generation: gen, Buffer: bufferFile(gen), State: &st}
	path := filepath.Join(dir, m.Buffer)
	if err := in.cfg.Buffer.SaveFile(path, opts); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("remote: checkpoint: %w", err)
	}
	m.BufferBytes = fi.Size()
	if checkpointStage != nil {
		checkpointStage("buffer")
	}
	data, err := json.Marshal(m)
	if err == nil {
		err = atomicfile.WriteBytes(filepath.Join(dir, CheckpointManifest), append(data, '\n'))
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("remote: checkpoint manifest: %w", err)
	}
	if checkpointStage != nil {
		checkpointStage("manifest")
	}
	// Committed: older generations, the earlier layout's buffer and the
	// temporary files of killed checkpoints go. A failure here leaves
	// only garbage, so it is not an error.
	for _, pat := range []string{"buffer-*.ckpt", legacyBufferFile, ".buffer*.tmp-*", "." + CheckpointManifest + ".tmp*"} {
		old, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, p := range old {
			if filepath.Base(p) != m.Buffer {
				_ = os.Remove(p)
			}
		}
	}
	return nil
}

// nextGeneration is one past the highest generation in dir (its
// manifest's or a buffer file's, of a checkpoint killed before its
// manifest), so that a checkpoint never overwrites a file a manifest
// names.
func nextGeneration(dir string) uint64 {
	var gen uint64
	if m, err := readManifest(dir); err == nil {
		gen = m.Generation
	}
	files, _ := filepath.Glob(filepath.Join(dir, "buffer-*.ckpt"))
	for _, p := range files {
		var g uint64
		if _, err := fmt.Sscanf(filepath.Base(p), "buffer-%d.ckpt", &g); err == nil {
			gen = max(gen, g)
		}
	}
	return gen + 1
}

// readManifest reads dir's manifest; a manifest of the earlier layout
// (the State alone) is returned with an empty Format and the buffer file
// it goes with.
func readManifest(dir string) (manifest, error) {
	path := filepath.Join(dir, CheckpointManifest)
	data, err := os.ReadFile(path)
	if err != nil {
		return manifest{}, fmt.Errorf("remote: checkpoint: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return manifest{}, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	switch m.Format {
	case "":
		var st State
		if err := json.Unmarshal(data, &st); err != nil {
			return manifest{}, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
		}
		return manifest{Buffer: legacyBufferFile, BufferBytes: -1, State: &st}, nil
	case manifestFormat:
		if m.Generation == 0 || m.Buffer != bufferFile(m.Generation) || m.State == nil || m.BufferBytes <= 0 {
			return manifest{}, fmt.Errorf("%w: %s is not a whole %s manifest", ErrConfig, path, manifestFormat)
		}
		return m, nil
	}
	return manifest{}, fmt.Errorf("%w: %s: unknown format %q", ErrConfig, path, m.Format)
}

// LoadCheckpoint loads what Checkpoint saved in dir: the buffer and the
// State to resume with. Errors wrap ErrConfig for a manifest that is not
// one, and are tensorbuf.LoadFile's for its buffer.
func LoadCheckpoint(dir string, opts tensorbuf.LoadOptions) (*tensorbuf.Buffer, *State, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, m.Buffer)
	if m.BufferBytes >= 0 {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, nil, fmt.Errorf("remote: checkpoint: %w", err)
		}
		if fi.Size() != m.BufferBytes {
			return nil, nil, fmt.Errorf("%w: %s is %d bytes, the manifest says %d", ErrConfig, path, fi.Size(), m.BufferBytes)
		}
	}
	buf, err := tensorbuf.LoadFile(path, opts)
	if err != nil {
		return nil, nil, err
	}
	return buf, m.State, nil
}

// StreamConfig configures the streams EnsureStreams creates. A plain value.
type StreamConfig struct {
	// Stream, Subject, DeadStream and DeadSubject name the frame stream
	// and the dead-letter stream (defaults DefaultStream, ...).
	Stream, Subject, DeadStream, DeadSubject string
	// Replicas is the number of copies in a cluster (default 1).
	Replicas int
	// MaxBytes bounds the frame stream (default 1 GiB); the oldest frames
	// are discarded beyond it, so size it to hold what a learner restart
	// must replay since its last checkpoint.
	MaxBytes int64
	// Duplicates is the de-duplication window of message ids (default 2 min).
	Duplicates time.Duration
	// Memory keeps the streams in memory instead of files (tests).
	Memory bool
}

// EnsureStreams creates or updates the frame stream and the dead-letter
// stream.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, c StreamConfig) error {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&c.Stream, DefaultStream)
	def(&c.Subject, DefaultSubject)
	def(&c.DeadStream, DefaultDeadStream)
	def(&c.DeadSubject, DefaultDeadSubject)
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 1 << 30
	}
	if c.Duplicates == 0 {
		c.Duplicates = 2 * time.Minute
	}
	storage := jetstream.FileStorage
	if c.Memory {
		storage = jetstream.MemoryStorage
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: c.Stream, Subjects: []string{c.Subject + ".>"}, Storage: storage, Replicas: c.Replicas,
		MaxBytes: c.MaxBytes, Discard: jetstream.DiscardOld, Duplicates: c.Duplicates, Retention: jetstream.LimitsPolicy,
	}); err != nil {
		return fmt.Errorf("remote: stream %q: %w", c.Stream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: c.DeadStream, Subjects: []string{c.DeadSubject}, Storage: storage, Replicas: c.Replicas,
		MaxBytes: c.MaxBytes / 16, Discard: jetstream.DiscardOld,
	}); err != nil {
		return fmt.Errorf("remote: stream %q: %w", c.DeadStream, err)
	}
	return nil
}
