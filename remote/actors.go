package remote

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// join gives an actor a contiguous range of free rows.
func (in *Ingester) join(id uint64, n int) (*actorState, error) {
	start := -1
	for i := 0; i+n <= len(in.free); i++ {
		if !slices.Contains(in.free[i:i+n], false) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("%w: actor %016x needs %d rows", ErrNoRows, id, n)
	}
	a := &actorState{id: id, rows: slices.Clone(in.cfg.Rows[start : start+n]), next: make([]int64, n), seqKnown: true}
	if err := in.open(a); err != nil {
		return nil, err
	}
	for i := start; i < start+n; i++ {
		in.free[i] = false
	}
	a.seen = time.Now()
	in.actors[id] = a
	in.stats.Joins++
	return a, nil
}

// open makes the actor's observer and scratch tensors.
func (in *Ingester) open(a *actorState) error {
	if in.cfg.NewObserver == nil {
		p, err := newPlainWriter(in.cfg.Buffer, in.schema.fields, a.rows)
		if err != nil {
			return fmt.Errorf("remote: writer for actor %016x: %w", a.id, err)
		}
		a.obs, a.fresh = p, true
		return nil
	}
	obs, err := in.cfg.NewObserver(in.cfg.Buffer, a.rows)
	if err != nil {
		return fmt.Errorf("remote: observer for actor %016x: %w", a.id, err)
	}
	a.obs, a.fresh = obs, true
	n := len(a.rows)
	a.cols, a.own = a.cols[:0], a.own[:0]
	t := &a.traj
	t.Observation, t.Action, t.PolicyInfo = map[string]*tensor.Dense{}, map[string]*tensor.Dense{}, map[string]*tensor.Dense{}
	for _, f := range in.schema.fields {
		d := tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(append([]int{n}, f.Shape...)...))
		switch f.Role {
		case tensorbuf.Action:
			t.Action[f.Name] = d
		case tensorbuf.PolicyInfo:
			t.PolicyInfo[f.Name] = d
		default:
			t.Observation[f.Name] = d
		}
		a.cols = append(a.cols, d)
		a.own = append(a.own, d.Header.Raw)
	}
	t.StepType, t.NextStepType = make([]tensorbuf.StepType, n), make([]tensorbuf.StepType, n)
	t.Reward, t.Discount, t.Active = make([]float32, n), make([]float32, n), make([]bool, n)
	return nil
}

// leave closes an actor's observer and frees its rows. It is remembered
// (forget) with its next frame: a late copy of an older frame is then a
// duplicate (a bye overrides this: every later frame is).
func (in *Ingester) leave(a *actorState) {
	if a.seqKnown {
		in.forget(a.id, a.nextFrame)
	}
	if a.obs != nil {
		_ = a.obs.Close()
	}
	for _, r := range a.rows {
		if i := slices.Index(in.cfg.Rows, r); i >= 0 {
			in.free[i] = true
		}
	}
	delete(in.actors, a.id)
	in.stats.Leaves++
}

// expireIdle frees the rows of actors idle longer than ActorIdle in
// stream time (none with frames held: they wait for a predecessor, nor
// with frames handed back) and reports whether it freed any.
func (in *Ingester) expireIdle() bool {
	if in.cfg.ActorIdle <= 0 {
		return false
	}
	freed := false
	for _, a := range in.actors {
		if a.last.IsZero() {
			a.last, a.at = in.newest, in.clock // resumed: idle from now on, in stream time
		}
		if len(a.held) == 0 && len(in.ro.backOf[a.id]) == 0 && in.clock-a.at > in.cfg.ActorIdle {
			in.leave(a)
			freed = true
		}
	}
	return freed
}

// refuse dead-letters a frame of an actor that declares more rows than
// the learner has in all: it can never join, and holding its frames while
// it waits for rows would pin the stream floor and the reorder memory for
// good. The first refusal of each actor is logged. The actor's publisher
// is not told: frames flow one way, and the stream acknowledges a publish
// before the learner reads it; the dead letter and the log say why.
func (in *Ingester) refuse(msg jetstream.Msg, seq uint64, f *Frame) {
	err := fmt.Errorf("%w: actor %016x declares %d rows, the learner has %d in all", ErrNoRows, f.Actor, f.ActorRows, len(in.cfg.Rows))
	in.stats.Refused++
	in.dead(msg, err.Error())
	in.done(msg, seq)
	if in.note(f.Actor) {
		in.cfg.Logger.Warn("remote: actor refused: it declares more rows than the learner has",
			"actor", fmt.Sprintf("%016x", f.Actor), "actor_rows", f.ActorRows, "learner_rows", len(in.cfg.Rows), "subject", msg.Subject())
	}
}

// failJoin dead-letters a frame of an actor whose observer could not be
// made (err, from the ObserverFactory or the row writer): the frame cannot
// be written, and waiting would hold it forever. The first failure of
// each actor is logged.
func (in *Ingester) failJoin(msg jetstream.Msg, seq uint64, actor uint64, err error) {
	in.dead(msg, err.Error())
	in.done(msg, seq)
	if in.note(actor) {
		in.cfg.Logger.Error("remote: actor's frames refused: its observer cannot be made",
			"actor", fmt.Sprintf("%016x", actor), "error", err, "subject", msg.Subject())
	}
}

// note reports whether actor id is noted for the first time (its refusal
// is to be logged); it remembers the newest maxGone actors.
func (in *Ingester) note(id uint64) bool { return in.noted.add(id) }

// noteSet remembers the newest maxGone actor ids added to it.
type noteSet struct {
	ids   map[uint64]struct{}
	order []uint64 // oldest first
}

// add reports whether id is added for the first time, and adds it.
func (s *noteSet) add(id uint64) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if s.ids == nil {
		s.ids = map[uint64]struct{}{}
	}
	s.ids[id] = struct{}{}
	s.order = append(s.order, id)
	if len(s.order) > maxGone {
		delete(s.ids, s.order[0])
		s.order = s.order[1:]
	}
	return true
}

// noteWaiting logs, once per actor, that a frame of actor id waits for
// free rows: with ActorIdle 0 only a bye frees rows, so an actor that
// vanished without one (killed) holds its rows, and the waiting actor's
// frames are not written, until the learner restarts without it.
// An actor whose frames were refused (logged by note) is not logged again.
func (in *Ingester) noteWaiting(id uint64, rows int, subject string) {
	if _, refused := in.noted.ids[id]; refused || !in.waitNoted.add(id) {
		return
	}
	free := 0
	for _, f := range in.free {
		if f {
			free++
		}
	}
	hint := "the rows of an actor that left without a bye are freed once it has been idle for ActorIdle (trajring serve -actor-idle)"
	if in.cfg.ActorIdle <= 0 {
		hint = "only a bye frees rows (ActorIdle 0, trajring serve -actor-idle 0): an actor that left without one holds its rows for good"
	}
	in.cfg.Logger.Warn("remote: actor waits for free rows", "actor", fmt.Sprintf("%016x", id), "actor_rows", rows,
		"free_rows", free, "learner_rows", len(in.cfg.Rows), "actors", len(in.actors), "subject", subject, "note", hint)
}
