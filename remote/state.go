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
	in.floor = s.StreamFloor
	return nil
}

// Checkpoint saves the buffer to dir/buffer.ckpt (tensorbuf.SaveFile) and
// the ingester's state to dir/ingester.json, atomically each, between two
// frames (ingestion pauses meanwhile). Resume with LoadCheckpoint and
// IngesterConfig.Resume.
func (in *Ingester) Checkpoint(dir string, opts tensorbuf.SaveOptions) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := in.stateLocked()
	if err := in.cfg.Buffer.SaveFile(filepath.Join(dir, "buffer.ckpt"), opts); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".ingester.json.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "ingester.json"))
}

// LoadCheckpoint loads what Checkpoint saved in dir.
func LoadCheckpoint(dir string, opts tensorbuf.LoadOptions) (*tensorbuf.Buffer, *State, error) {
	data, err := os.ReadFile(filepath.Join(dir, "ingester.json"))
	if err != nil {
		return nil, nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, nil, fmt.Errorf("%w: ingester state: %v", ErrConfig, err)
	}
	buf, err := tensorbuf.LoadFile(filepath.Join(dir, "buffer.ckpt"), opts)
	if err != nil {
		return nil, nil, err
	}
	return buf, &st, nil
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
