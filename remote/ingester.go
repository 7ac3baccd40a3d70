package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// RowObserver is what the Ingester writes an actor's steps through: an
// item-writing observer (or an observer.Shared group) over the actor's
// buffer rows, closed when the actor leaves.
type RowObserver interface {
	driver.Observer
	Close() error
}

// ObserverFactory makes the observer of a joining actor over the given
// buffer rows (one per local row of the actor, in order). Use it to create
// items exactly as a local collection would, e.g. with an observer.Shared
// group and its NewTrajectorySequence and NewAddEpisode members.
type ObserverFactory func(buf *tensorbuf.Buffer, rows []int) (RowObserver, error)

// PlainObserver is the default factory: an observer.Shared group without
// members, which stores every step and creates no item.
func PlainObserver(buf *tensorbuf.Buffer, rows []int) (RowObserver, error) {
	return observer.NewShared(buf, observer.SharedConfig{Rows: rows})
}

// IngesterConfig configures an Ingester. It is a plain value.
type IngesterConfig struct {
	// JetStream is the learner's client (required).
	JetStream jetstream.JetStream
	// Buffer receives the steps (required).
	Buffer *tensorbuf.Buffer
	// Rows are the buffer rows actors may be given (nil: all rows). An
	// actor is given a contiguous range of free rows, one per row it
	// declares; one that declares more rows than Rows holds is refused:
	// its frames go to the dead-letter subject (IngesterStats.Refused)
	// and it is logged. One that does not fit in the free rows now waits,
	// without holding back later actors that fit.
	Rows []int
	// NewObserver makes each actor's observer (nil: the steps are
	// written as PlainObserver would, by a tensorbuf.Writer of the actor's
	// rows, without an observer: see plain.go).
	NewObserver ObserverFactory
	// Stream, Subject, Durable and DeadSubject name the stream, the subject
	// prefix of frames, the durable consumer and the dead-letter subject
	// (defaults DefaultStream, DefaultSubject, DefaultDurable,
	// DefaultDeadSubject).
	Stream, Subject, Durable, DeadSubject string
	// GapTimeout is how long a frame that comes before its predecessor
	// (a publish retried after a server restart lands after its
	// successors) waits for the missing frames before the gap is accepted
	// as a cut (default 15 s: above the Publisher's AckTimeout). It is
	// measured in stream time: the frame waits until the stream has
	// delivered frames stored GapTimeout after it (a pause in the stream,
	// such as a server outage, counting at most one second), or, once the
	// consumer has caught up, until GapTimeout has passed since it was
	// stored; a backlog therefore never cuts a gap whose frames are in the
	// stream. A missing frame that was delivered and handed back (see
	// ReorderBytes) is never given up.
	GapTimeout time.Duration
	// ReorderBytes bounds the memory of the frames held in the ingester
	// while they wait for a predecessor or for free rows (default 64
	// MiB), each frame counted as its bytes but at least heldFrameCost
	// (256 bytes: its bookkeeping), which also bounds their number
	// (ReorderBytes / 256; the consumer's MaxAckPending leaves room for
	// them besides 4 x Prefetch frames). A frame beyond it is handed back
	// to the stream (redelivered after GapDelay, or a second when its
	// actor waits for rows) and written when it comes again: no gap
	// before a handed-back frame is given up.
	ReorderBytes int
	// GapDelay is the redelivery delay of a frame handed back (default
	// 100 ms) and the period at which held frames are checked.
	GapDelay time.Duration
	// ActorIdle frees the rows of an actor whose newest frame was stored
	// this long before the newest frame the ingester has received (stream
	// time, so a backlog does not make live actors look idle, and a pause
	// in the stream counts at most one second, so a server outage does
	// not either), or, when no frames come, from which no frame came for
	// this long (wall time, not counting time before the stream was last
	// unreachable) while the stream holds none newer (default 0: only a
	// bye frame frees them). A frame of the actor that comes later makes
	// it join again, on free rows, after a cut; a late copy of a frame it
	// had sent is dropped as a duplicate.
	ActorIdle time.Duration
	// Resume continues from a State saved with a buffer checkpoint: the
	// actors keep their rows and the consumer restarts after the last
	// frame the checkpoint holds.
	Resume *State
	// AckWait is the consumer's acknowledgement deadline (default 30 s).
	AckWait time.Duration
	// Prefetch bounds the frames delivered and not yet acknowledged
	// besides the held ones (the consumer's MaxAckPending is 4 x Prefetch
	// plus the most frames ReorderBytes can hold; default 256).
	Prefetch int
	// PrefetchBytes bounds the frame bytes the client buffers ahead of
	// the writes (default 32 MiB; keep it under the client's 64 MiB
	// pending limit of a subscription, or frames are dropped as a slow
	// consumer and come back only after AckWait).
	PrefetchBytes int
	// Logger receives what needs an operator's attention, such as an
	// actor refused because it can never fit (nil: slog.Default()).
	Logger *slog.Logger
}

// IngesterStats counts what an Ingester has done. A plain value.
type IngesterStats struct {
	Frames     int64 // data frames written (in whole or in part)
	Steps      int64 // row steps written
	Bytes      int64 // frame bytes received (as stored)
	Duplicates int64 // row steps dropped as already written
	DupFrames  int64 // frames dropped entirely as already written
	Dead       int64 // frames refused to the dead-letter subject
	Refused    int64 // frames of actors declaring more rows than the learner has (also in Dead)
	Gaps       int64 // rows whose frame skipped steps (each became a cut)
	Deferred   int64 // redeliveries asked for (reorder bound reached, no free rows)
	Held       int64 // frames held until their predecessor arrived
	Joins      int64 // actors given rows
	Leaves     int64 // actors whose rows were freed
	ObserveErr int64 // observer errors on written steps (item errors)
}

// actorState is an actor's rows and progress.
type actorState struct {
	id   uint64
	rows []int   // buffer rows, one per local row
	next []int64 // next expected step per local row
	obs  RowObserver
	last time.Time     // stored time of its newest frame (zero: none yet)
	at   time.Duration // stream clock when that frame came
	// seen is the wall time a frame of it last came, lastSeq the highest
	// stream sequence of its frames, asked when the stream was last asked
	// whether it holds newer ones (see expireStalled).
	seen, asked time.Time
	lastSeq     uint64
	// nextFrame is the actor's lowest frame sequence number not yet
	// handled (seqKnown false: unknown, after resuming an older State);
	// held are its frames that came before a predecessor, by sequence.
	nextFrame uint64
	seqKnown  bool
	held      []*heldFrame
	cols      []*tensor.Dense // scratch tensor per user field, schema order
	own       [][]byte        // each scratch tensor's own memory
	traj      driver.Trajectory
	fresh     bool // observer just made: no row continues across it
}

// Ingester is the learner side: it consumes frames from a durable pull
// consumer and writes them into a buffer. Run it with Run; Stats, State
// and Checkpoint are safe to call from other goroutines at any time.
type Ingester struct {
	cfg    IngesterConfig
	schema *Schema
	cons   jetstream.Consumer

	mu     sync.Mutex
	actors map[uint64]*actorState
	free   []bool // free[i]: cfg.Rows[i] is free
	stats  IngesterStats
	ro     reorderState
	frame  Frame
	sel    []bool

	gone      map[uint64]uint64      // actors that left: their frames numbered below this are duplicates
	waiting   map[uint64]*actorState // actors with frames held and no rows yet
	goneOrder []uint64
	// noted are the actors whose refusal was logged (once each), waitNoted
	// those whose wait for rows was; each at most maxGone.
	noted, waitNoted noteSet
	newest           time.Time // newest stored time received (stream time)
	// clock is stream time without its pauses: how far the stored time of
	// the frames received has advanced, each jump counted up to
	// streamPause, so that a server outage (no frame is stored) or a
	// quiet stream does not make every actor look idle, nor a held
	// frame's wait longer, when frames come again. Idleness and gap
	// timeouts are measured on it.
	clock time.Duration
	// down is the wall time the stream was last found unreachable: the
	// wall-clock idle check counts no time before it.
	down    time.Time
	pending uint64    // consumer's pending count at the last delivery
	lastMsg time.Time // wall time the last message was handled
	full    time.Time // wall time a frame was last refused a hold (bounds reached)
}

// NewIngester creates (or, when resuming, recreates) the durable consumer
// and returns an Ingester. The stream must exist (see EnsureStreams).
func NewIngester(ctx context.Context, cfg IngesterConfig) (*Ingester, error) {
	if cfg.JetStream == nil || cfg.Buffer == nil {
		return nil, fmt.Errorf("%w: Ingester needs a JetStream client and a buffer", ErrConfig)
	}
	in, err := newIngester(cfg)
	if err != nil {
		return nil, err
	}
	cfg = in.cfg
	ccfg := jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: in.ro.maxHeld + 4*cfg.Prefetch,
		FilterSubject: cfg.Subject + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if r := cfg.Resume; r != nil {
		if err := in.restore(r); err != nil {
			in.closeActors()
			return nil, err
		}
		// Restart the durable consumer after the last frame the checkpoint
		// holds; frames acknowledged after the checkpoint come again and
		// are written (or dropped as duplicates) once.
		if err := cfg.JetStream.DeleteConsumer(ctx, cfg.Stream, cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			in.closeActors()
			return nil, fmt.Errorf("remote: resetting consumer %q: %w", cfg.Durable, err)
		}
		ccfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		ccfg.OptStartSeq = r.StreamFloor + 1
	}
	cons, err := cfg.JetStream.CreateOrUpdateConsumer(ctx, cfg.Stream, ccfg)
	if err != nil {
		in.closeActors()
		return nil, fmt.Errorf("remote: consumer %q on %q: %w", cfg.Durable, cfg.Stream, err)
	}
	in.cons = cons
	return in, nil
}

// newIngester applies cfg's defaults, checks it and returns an Ingester
// without a consumer (NewIngester adds it).
func newIngester(cfg IngesterConfig) (*Ingester, error) {
	s, err := NewSchema(cfg.Buffer.Fields())
	if err != nil {
		return nil, err
	}
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&cfg.Stream, DefaultStream)
	def(&cfg.Subject, DefaultSubject)
	def(&cfg.Durable, DefaultDurable)
	def(&cfg.DeadSubject, DefaultDeadSubject)
	if cfg.GapTimeout == 0 {
		cfg.GapTimeout = 15 * time.Second
	}
	if cfg.GapDelay == 0 {
		cfg.GapDelay = 100 * time.Millisecond
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 256
	}
	if cfg.PrefetchBytes == 0 {
		cfg.PrefetchBytes = 32 << 20
	}
	if cfg.ReorderBytes == 0 {
		cfg.ReorderBytes = 64 << 20
	}
	if cfg.Prefetch < 0 || cfg.PrefetchBytes < 0 || cfg.PrefetchBytes < headerSize || cfg.ReorderBytes < 0 {
		return nil, fmt.Errorf("%w: prefetch %d frames, %d bytes", ErrConfig, cfg.Prefetch, cfg.PrefetchBytes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rows == nil {
		for r := range cfg.Buffer.NumEnvs() {
			cfg.Rows = append(cfg.Rows, r)
		}
	}
	in := &Ingester{cfg: cfg, schema: s, actors: map[uint64]*actorState{}, free: make([]bool, len(cfg.Rows)), ro: newReorderState(cfg.ReorderBytes), gone: map[uint64]uint64{}, waiting: map[uint64]*actorState{}}
	for i := range in.free {
		in.free[i] = true
	}
	return in, nil
}

// Stats returns the ingester's counts.
func (in *Ingester) Stats() IngesterStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stats
}

// Occupancy returns the number of actors holding rows now and of actors
// whose frames wait for free rows now (a warning is logged once for each
// of these; see IngesterConfig.ActorIdle).
func (in *Ingester) Occupancy() (actors, waiting int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	waiting = len(in.waiting)
	for id := range in.ro.backOf { // waiting, with every frame handed back
		if in.actors[id] == nil && in.waiting[id] == nil {
			waiting++
		}
	}
	return len(in.actors), waiting
}

// Run consumes frames until ctx is done (then it returns nil) or the
// consumer cannot go on: the client's connection is closed for good (an
// error wrapping nats.ErrConnectionClosed), or the durable consumer or its
// stream no longer exists (an error wrapping jetstream.ErrConsumerNotFound
// or jetstream.ErrStreamNotFound, once the server has said so twice, a
// second apart). Everything else (a server restart, a leader election, a
// timeout) is retried. Run once at a time.
func (in *Ingester) Run(ctx context.Context) error {
	defer in.closeActors()
	tctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { in.tickLoop(tctx) })
	defer wg.Wait()
	defer cancel()
	for ctx.Err() == nil {
		it, err := in.cons.Messages(jetstream.PullMaxBytes(in.cfg.PrefetchBytes), jetstream.PullExpiry(2*time.Second))
		if err == nil {
			stop := context.AfterFunc(ctx, it.Stop)
			for {
				msg, err := it.Next()
				if err != nil {
					break
				}
				in.handle(msg)
			}
			stop()
			it.Stop()
		}
		if ctx.Err() != nil {
			break
		}
		in.mu.Lock()
		in.down = time.Now()
		in.mu.Unlock()
		if err := in.lost(ctx); err != nil {
			return err
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return nil
}

// lost reports why the consumer cannot go on after it stopped delivering,
// or nil if it may come back (see Run).
func (in *Ingester) lost(ctx context.Context) error {
	if nc := in.cfg.JetStream.Conn(); nc != nil {
		if nc.IsClosed() {
			return fmt.Errorf("remote: consumer %q: %w", in.cfg.Durable, nats.ErrConnectionClosed)
		}
		if !nc.IsConnected() {
			return nil // reconnecting: ask the server once it is back
		}
	}
	var err error
	for i := range 2 {
		if i > 0 && !sleepCtx(ctx, time.Second) {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = in.cfg.JetStream.Consumer(cctx, in.cfg.Stream, in.cfg.Durable)
		cancel()
		if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
	}
	return fmt.Errorf("remote: consumer %q on stream %q: %w", in.cfg.Durable, in.cfg.Stream, err)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// closeActors closes every actor's observer (on exit); their rows stay
// assigned in the State.
func (in *Ingester) closeActors() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, a := range in.actors {
		if a.obs != nil {
			_ = a.obs.Close()
			a.obs = nil
		}
	}
}

// handle processes one message: dead-letter, hold (it comes before a
// predecessor), defer, or write then ack; then writes the frames it let
// through from those held.
func (in *Ingester) handle(msg jetstream.Msg) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.lastMsg = time.Now()
	md, err := msg.Metadata()
	if err != nil {
		_ = msg.Term()
		return
	}
	seq := md.Sequence.Stream
	data := msg.Data()
	in.stats.Bytes += int64(len(data))
	if md.Timestamp.After(in.newest) {
		if !in.newest.IsZero() {
			in.clock += min(md.Timestamp.Sub(in.newest), streamPause)
		}
		in.newest = md.Timestamp
	}
	in.pending = md.NumPending
	if h := in.ro.held[seq]; h != nil {
		// Redelivered while held here (an acknowledgement deadline or a
		// server restart): keep the newest delivery to acknowledge.
		h.msg = msg
		return
	}
	if in.expireIdle() {
		in.admit() // before the frame is decoded: admit decodes too
	}
	f := &in.frame
	if err := in.schema.Decode(data, f); err != nil {
		in.dead(msg, err.Error())
		in.done(msg, seq)
		return
	}
	// An actor that left: a late copy of one of its frames (a redelivery
	// whose acknowledgement a server restart lost) is a duplicate; a newer
	// frame of an actor freed as idle makes it join again, after a cut.
	next, left := in.gone[f.Actor]
	if left && f.Seq < next {
		in.dupFrame(msg, seq, f)
		return
	}
	a := in.actors[f.Actor]
	if a == nil {
		w := in.waiting[f.Actor]
		if w == nil && f.Bye && len(in.ro.backOf[f.Actor]) == 0 {
			in.forget(f.Actor, math.MaxUint64)
			in.done(msg, seq)
			return
		}
		if w == nil && f.ActorRows > len(in.cfg.Rows) {
			in.refuse(msg, seq, f)
			return
		}
		if w == nil {
			var err error
			if a, err = in.join(f.Actor, f.ActorRows); err != nil && !errors.Is(err, ErrNoRows) {
				in.failJoin(msg, seq, f.Actor, err)
				return
			}
			if a != nil && left {
				a.nextFrame = next
			}
		}
		if a == nil {
			// No rows free: the frame waits in the ingester while later
			// frames advance stream time (idle actors leave).
			if w == nil {
				w = &actorState{id: f.Actor, seqKnown: true, nextFrame: next}
				in.waiting[f.Actor] = w
				in.noteWaiting(f.Actor, f.ActorRows, msg.Subject())
			}
			if !in.hold(w, msg, seq, f, md.Timestamp) {
				in.stats.Deferred++
				in.defer_(msg, seq, time.Second, f.Actor, f.Seq)
			}
			in.admit()
			return
		}
	}
	if md.Timestamp.After(a.last) {
		a.last, a.at = md.Timestamp, in.clock
	}
	a.seen, a.lastSeq = in.lastMsg, max(a.lastSeq, seq)
	if !in.ready(a, f) {
		if !in.hold(a, msg, seq, f, md.Timestamp) {
			in.stats.Deferred++
			in.defer_(msg, seq, in.cfg.GapDelay, a.id, f.Seq)
		}
		return
	}
	in.process(a, msg, seq, f)
	in.drain(a, false)
	in.admit()
}

// dupFrame drops a frame whose steps are all written already.
func (in *Ingester) dupFrame(msg jetstream.Msg, seq uint64, f *Frame) {
	in.stats.DupFrames++
	in.stats.Duplicates += int64(len(f.Rows) * f.K)
	in.done(msg, seq)
}

// process handles a frame of actor a that is next in the actor's order
// (or whose predecessors are given up on): a bye frees the actor's rows;
// a data frame is written, after a cut of the rows it skips steps of.
// It reports false if the frame was handed back (a cut failed).
func (in *Ingester) process(a *actorState, msg jetstream.Msg, seq uint64, f *Frame) bool {
	if f.Bye {
		in.leave(a)
		in.forget(a.id, math.MaxUint64)
		in.done(msg, seq)
		return true
	}
	if f.ActorRows != len(a.rows) {
		in.dead(msg, fmt.Sprintf("actor %016x has %d rows, frame says %d", f.Actor, len(a.rows), f.ActorRows))
		in.done(msg, seq)
		return true
	}
	// Duplicates and gaps, per row.
	gap, fresh := false, false
	for i, r := range f.Rows {
		switch n := a.next[r]; {
		case f.First[i] > n:
			gap = true
		case f.First[i]+int64(f.K) > n:
			fresh = true
		}
	}
	if !gap && !fresh {
		in.advance(a, f)
		in.dupFrame(msg, seq, f)
		return true
	}
	if gap {
		if err := in.cut(a, f); err != nil {
			in.defer_(msg, seq, time.Second, a.id, f.Seq)
			return false
		}
		in.dead(msg, "gap")
	}
	in.advance(a, f)
	in.write(a, f)
	in.done(msg, seq)
	return true
}

// advance records that frame f of actor a is handled.
func (in *Ingester) advance(a *actorState, f *Frame) {
	if !a.seqKnown || f.Seq >= a.nextFrame {
		a.nextFrame, a.seqKnown = f.Seq+1, true
	}
}

// done acknowledges a processed message and advances the floor.
func (in *Ingester) done(msg jetstream.Msg, seq uint64) {
	_ = msg.Ack()
	delete(in.ro.undone, seq)
	if o := in.ro.handedBack[seq]; o != nil {
		in.unback(seq, o)
	}
	if seq > in.ro.floor {
		in.ro.floor = seq
	}
}

// streamFloor is the highest stream sequence up to which every frame is
// written or refused.
func (in *Ingester) streamFloor() uint64 {
	f := in.ro.floor
	for s := range in.ro.undone {
		if s-1 < f {
			f = s - 1
		}
	}
	return f
}

// dead publishes a copy of a refused (or, for "gap", accepted after a
// cut) frame to the dead-letter subject with the reason in a header.
func (in *Ingester) dead(msg jetstream.Msg, reason string) {
	in.stats.Dead++
	m := nats.NewMsg(in.cfg.DeadSubject)
	m.Data = msg.Data()
	m.Header.Set("Trajring-Reason", reason)
	m.Header.Set("Trajring-Subject", msg.Subject())
	_, _ = in.cfg.JetStream.PublishMsgAsync(m)
}
