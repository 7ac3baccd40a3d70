package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Reordering. An actor's frames carry consecutive sequence numbers and
// are written in that order. A frame that comes before a predecessor (a
// publish retried after a timeout or a server restart is stored after its
// successors) is held in the ingester, unacknowledged, until the
// predecessor comes; then both are written and acknowledged. Handing such
// a frame back to the stream instead (a negative acknowledgement with a
// delay) keeps it counted against the consumer's MaxAckPending: under a
// backlog the handed-back frames fill that window and hold back the very
// predecessor they wait for until the gap is cut. Held frames are bounded
// (ReorderBytes, which also bounds their number: see heldFrameCost; the
// consumer's MaxAckPending leaves room for that many besides the
// prefetched ones); beyond that a frame is handed back as before. A handed-back frame comes
// again (after its delay), so no gap before it is ever given up: a frame
// held behind it waits for it, however long, and the actor is not idle
// meanwhile, nor does its bye free its rows before it is written.

// maxGone bounds the actors remembered as gone (left with a bye or idle).
const maxGone = 4096

// streamPause is the most one jump of the stored time between two frames
// adds to the stream clock (Ingester.clock).
const streamPause = time.Second

// quietBeforeWallClock is how long no message must have come, with the
// consumer caught up, before a held frame's wait is measured in wall time.
const quietBeforeWallClock = time.Second

// heldFrameCost is the least a held frame counts against ReorderBytes
// (its bookkeeping: the heldFrame, the message, map entries), so that
// ReorderBytes bounds the number of held frames too. The bound used to be
// 64 x Prefetch frames (16,384), reached in the 24-row soak at about 12
// MB of small frames: every later frame was handed back and redelivered
// each second (Nak churn) while 52 MB of ReorderBytes stayed unused.
const heldFrameCost = 256

// maxHeldFrames returns the most frames ReorderBytes can hold (at most
// 1<<24, so that MaxAckPending stays a modest number).
func maxHeldFrames(reorderBytes int) int {
	return min(reorderBytes/heldFrameCost, 1<<24)
}

// heldCost is what a held frame of n bytes counts against ReorderBytes.
func heldCost(n int) int { return max(n, heldFrameCost) }

// heldFrame is a frame held until its predecessor comes.
type heldFrame struct {
	msg     jetstream.Msg
	seq     uint64        // stream sequence
	fseq    uint64        // the actor's frame sequence
	rows    int           // the actor's rows, as the frame declares them
	stored  time.Time     // stored time in the stream
	clock   time.Duration // stream clock when it came
	data    []byte
	touched time.Time // last acknowledgement-deadline extension (wall time)
	// received is the wall time it came.
	received time.Time
}

// ready reports whether frame f of actor a may be handled now: its
// predecessors are handled (or, when the actor's frame sequence is not
// known after resuming an older State, it skips no step).
func (in *Ingester) ready(a *actorState, f *Frame) bool {
	if a.seqKnown {
		return f.Seq <= a.nextFrame
	}
	if f.Bye || f.ActorRows != len(a.rows) {
		return true
	}
	for i, r := range f.Rows {
		if f.First[i] > a.next[r] {
			return false
		}
	}
	return true
}

// hold keeps a frame that came before a predecessor; it reports false
// when the reorder bounds are reached (the caller hands it back).
func (in *Ingester) hold(a *actorState, msg jetstream.Msg, seq uint64, f *Frame, stored time.Time) bool {
	data := msg.Data()
	if len(in.ro.held) >= in.ro.maxHeld || in.ro.heldBytes+heldCost(len(data)) > in.cfg.ReorderBytes {
		in.full = time.Now()
		return false
	}
	if stored.After(a.last) {
		a.last, a.at = stored, in.clock
	}
	a.seen, a.lastSeq = in.lastMsg, max(a.lastSeq, seq)
	now := time.Now()
	h := &heldFrame{msg: msg, seq: seq, fseq: f.Seq, rows: f.ActorRows, stored: stored, clock: in.clock, data: data, touched: now, received: now}
	i, _ := slices.BinarySearchFunc(a.held, h, func(x, y *heldFrame) int {
		switch {
		case x.fseq < y.fseq:
			return -1
		case x.fseq > y.fseq:
			return 1
		}
		return 0
	})
	a.held = slices.Insert(a.held, i, h)
	in.ro.held[seq] = h
	in.ro.undone[seq] = struct{}{}
	in.ro.heldBytes += heldCost(len(data))
	in.stats.Held++
	return true
}

// unhold removes actor a's first held frame and decodes it into in.frame.
func (in *Ingester) unhold(a *actorState) (*heldFrame, *Frame, error) {
	h := a.held[0]
	a.held[0] = nil
	a.held = a.held[1:]
	delete(in.ro.held, h.seq)
	in.ro.heldBytes -= heldCost(len(h.data))
	f := &in.frame
	return h, f, in.schema.Decode(h.data, f)
}

// drain handles actor a's held frames that are ready; with force it also
// gives up on the predecessors of the first held frame if it has waited
// GapTimeout (see expired), and of each next one that has too.
func (in *Ingester) drain(a *actorState, force bool) {
	for len(a.held) > 0 && in.actors[a.id] == a {
		h := a.held[0]
		f := &in.frame
		if err := in.schema.Decode(h.data, f); err != nil {
			in.unhold(a) // cannot happen: it was decoded before
			in.dead(h.msg, err.Error())
			in.done(h.msg, h.seq)
			continue
		}
		if !in.ready(a, f) && !(force && in.giveUp(a, h)) {
			return
		}
		in.unhold(a)
		if !in.process(a, h.msg, h.seq, f) {
			return
		}
	}
	// The actor left (a bye): what it still holds came after its bye.
	for len(a.held) > 0 {
		h, f, err := in.unhold(a)
		if err == nil {
			in.dupFrame(h.msg, h.seq, f)
		} else {
			in.done(h.msg, h.seq)
		}
	}
}

// expired reports whether a held frame has waited GapTimeout for its
// predecessors: in stream time (frames stored GapTimeout after it have
// come), or, when the consumer has caught up and no message came for a
// while, in wall time since it was stored; or, while the reorder bounds
// are reached (frames are handed back, and the consumer's window may be
// full of them: the predecessor may never come), in wall time since it
// came. A frame whose predecessor was handed back never expires: that
// predecessor comes again (giving it up used to lose its steps: it was
// dropped as a duplicate when it came).
func (in *Ingester) expired(h *heldFrame) bool {
	if in.clock-h.clock >= in.cfg.GapTimeout {
		return true
	}
	now := time.Now()
	if now.Sub(in.full) < quietBeforeWallClock && now.Sub(laterOf(h.received, in.down)) >= in.cfg.GapTimeout {
		return true
	}
	return in.pending == 0 && now.Sub(in.lastMsg) >= min(quietBeforeWallClock, in.cfg.GapTimeout) &&
		now.Sub(laterOf(h.stored, in.down)) >= in.cfg.GapTimeout
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// giveUp decides whether actor a's first held frame h, which waits for
// a predecessor, is written now after a cut. Frames handed back come
// again, so the wait goes on while the actor's next frame is handed back;
// otherwise, once h has waited GapTimeout (expired), the missing frames
// are given up, but only up to the lowest frame handed back between them
// and h, if any: that one becomes the next (written after a cut when it
// comes), and h waits on.
func (in *Ingester) giveUp(a *actorState, h *heldFrame) bool {
	next, low, found := false, uint64(0), false
	for _, fs := range in.ro.backOf[a.id] {
		switch {
		case !a.seqKnown && fs < h.fseq, a.seqKnown && fs == a.nextFrame:
			next = true
		case a.seqKnown && fs > a.nextFrame && fs < h.fseq && (!found || fs < low):
			low, found = fs, true
		}
	}
	if next || !in.expired(h) {
		return false
	}
	if found {
		a.nextFrame = low
		return false
	}
	return true
}

// reorderState is what the ingester knows of the stream sequences it has
// received and not finished: the frames it holds until their
// predecessors come, the frames it handed back to the stream, which will
// come again, and the floor below which every frame is done (written or
// refused). The Ingester's mutex guards it.
type reorderState struct {
	floor  uint64              // every frame up to this stream sequence is done
	undone map[uint64]struct{} // stream sequences held or handed back, not yet done
	// handedBack are the frames handed back, by stream sequence; backOf
	// the same frames per actor (stream sequence -> frame sequence): they
	// will come again, so the actor is not idle and they are not given up.
	handedBack map[uint64]*outFrame
	backOf     map[uint64]map[uint64]uint64
	held       map[uint64]*heldFrame // frames held for reordering, by stream sequence
	heldBytes  int                   // their cost (heldCost), bounded by ReorderBytes
	maxHeld    int                   // bound on len(held), below MaxAckPending
}

// newReorderState returns an empty reorderState for ReorderBytes.
func newReorderState(reorderBytes int) reorderState {
	return reorderState{undone: map[uint64]struct{}{}, handedBack: map[uint64]*outFrame{},
		backOf: map[uint64]map[uint64]uint64{}, held: map[uint64]*heldFrame{}, maxHeld: maxHeldFrames(reorderBytes)}
}

// outFrame is a frame handed back: its actor, its frame sequence and
// when it was last handed back.
type outFrame struct {
	actor, fseq uint64
	at          time.Time
}

// defer_ hands frame fseq of an actor back for later redelivery.
func (in *Ingester) defer_(msg jetstream.Msg, seq uint64, d time.Duration, actor, fseq uint64) {
	in.ro.undone[seq] = struct{}{}
	if o := in.ro.handedBack[seq]; o != nil {
		o.at = time.Now()
	} else {
		in.ro.handedBack[seq] = &outFrame{actor: actor, fseq: fseq, at: time.Now()}
		if in.ro.backOf[actor] == nil {
			in.ro.backOf[actor] = map[uint64]uint64{}
		}
		in.ro.backOf[actor][seq] = fseq
	}
	_ = msg.NakWithDelay(d)
}

// unback forgets a frame handed back.
func (in *Ingester) unback(seq uint64, o *outFrame) {
	delete(in.ro.handedBack, seq)
	if delete(in.ro.backOf[o.actor], seq); len(in.ro.backOf[o.actor]) == 0 {
		delete(in.ro.backOf, o.actor)
	}
}

// pruneBack forgets the frames handed back that have not come again for
// AckWait + GapTimeout (the stream discarded them: a limit, a deletion);
// they stay below the checkpoint floor, so a restart replays from them.
func (in *Ingester) pruneBack() {
	now := time.Now()
	for seq, o := range in.ro.handedBack {
		if now.Sub(o.at) > in.cfg.AckWait+in.cfg.GapTimeout {
			in.unback(seq, o)
		}
	}
}

// forget remembers an actor that left, with the first frame sequence
// that is not a duplicate (math.MaxUint64 after a bye: none), so that late
// copies of its frames are dropped instead of making it join again.
func (in *Ingester) forget(id, next uint64) {
	if _, ok := in.gone[id]; ok {
		in.gone[id] = next
		return
	}
	in.gone[id] = next
	in.goneOrder = append(in.goneOrder, id)
	if len(in.goneOrder) > maxGone {
		delete(in.gone, in.goneOrder[0])
		in.goneOrder = in.goneOrder[1:]
	}
}

// tickLoop checks the held frames every GapDelay until ctx is done.
func (in *Ingester) tickLoop(ctx context.Context) {
	t := time.NewTicker(in.cfg.GapDelay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			in.tick()
			in.expireStalled(ctx)
		}
	}
}

// tick forgets frames handed back that the stream no longer has, extends
// the acknowledgement deadline of held frames and writes those whose
// predecessors are given up on (after a cut).
func (in *Ingester) tick() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.pruneBack()
	if len(in.ro.held) == 0 {
		return
	}
	now := time.Now()
	for _, h := range in.ro.held {
		if now.Sub(h.touched) >= in.cfg.AckWait/3 {
			_ = h.msg.InProgress()
			h.touched = now
		}
	}
	for _, a := range in.actors {
		if len(a.held) > 0 {
			in.drain(a, true)
		}
	}
	in.admit()
}

// admit gives rows to waiting actors, the one waiting longest (in stream
// order) first, and writes what they hold. An actor that does not fit in
// the free rows now is passed over, not waited for, so that it never
// holds back a later one that fits; it is tried again, ahead of later
// ones, whenever admit runs (after rows are freed).
func (in *Ingester) admit() {
	for admitted := true; admitted; {
		admitted = false
		var ws []*actorState
		for id, c := range in.waiting {
			if len(c.held) == 0 {
				delete(in.waiting, id) // all it had was handed back
				continue
			}
			ws = append(ws, c)
		}
		slices.SortFunc(ws, func(x, y *actorState) int { return cmp.Compare(x.held[0].seq, y.held[0].seq) })
		for _, w := range ws {
			if in.waiting[w.id] != w || len(w.held) == 0 {
				continue
			}
			// The first held frame (lowest frame sequence; a bye too) says
			// how many rows: noted when it was held, so that admit, which
			// tries every waiting actor, decodes nothing.
			a, err := in.join(w.id, w.held[0].rows)
			if errors.Is(err, ErrNoRows) {
				continue
			}
			delete(in.waiting, w.id)
			if err != nil {
				for len(w.held) > 0 {
					h, _, _ := in.unhold(w)
					in.failJoin(h.msg, h.seq, w.id, err)
				}
				continue
			}
			admitted = true
			a.nextFrame = w.nextFrame // after it left idle (see handle), else 0
			// Idle since its newest frame, in stream time as any actor: every
			// frame stored before the newest one received has come (those
			// handed back keep it alive), so an actor that waited longer than
			// ActorIdle after its last frame (one killed) frees its rows as
			// soon as its frames are written, not ActorIdle later.
			a.held, a.last, a.at, a.seen, a.lastSeq = w.held, w.last, w.at, w.seen, w.lastSeq
			in.drain(a, false)
		}
	}
}

// expireStalled frees the rows of actors from which no frame came for
// ActorIdle (wall time, none of it before the stream was last found
// unreachable: right after an outage the stream does not yet hold the
// frames live actors are retrying) and of which the stream holds no newer
// frame.
// Stream-time idleness (expireIdle) needs newer frames to come; when the
// consumer's window is full of frames waiting for rows that idle actors
// hold, none come, and this breaks the wait. A live actor whose frames
// are behind a backlog has newer frames in the stream and stays.
func (in *Ingester) expireStalled(ctx context.Context) {
	if in.cfg.ActorIdle <= 0 {
		return
	}
	type cand struct {
		a   *actorState
		seq uint64
	}
	var cs []cand
	in.mu.Lock()
	now := time.Now()
	if nc := in.cfg.JetStream.Conn(); nc != nil && !nc.IsConnected() {
		in.down = now
	}
	for _, a := range in.actors {
		if len(a.held) == 0 && len(in.ro.backOf[a.id]) == 0 && now.Sub(laterOf(a.seen, in.down)) > in.cfg.ActorIdle && now.Sub(a.asked) > in.cfg.ActorIdle/4 {
			a.asked = now
			cs = append(cs, cand{a, a.lastSeq})
		}
	}
	in.mu.Unlock()
	if len(cs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unreachable := func() {
		in.mu.Lock()
		in.down = time.Now()
		in.mu.Unlock()
	}
	st, err := in.cfg.JetStream.Stream(ctx, in.cfg.Stream)
	if err != nil {
		unreachable()
		return
	}
	for _, c := range cs {
		m, err := st.GetLastMsgForSubject(ctx, fmt.Sprintf("%s.%016x", in.cfg.Subject, c.a.id))
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			unreachable()
			continue
		}
		if m != nil && m.Sequence > c.seq {
			continue // newer frames are on their way
		}
		in.mu.Lock()
		if a := c.a; in.actors[a.id] == a && a.lastSeq == c.seq && len(a.held) == 0 && len(in.ro.backOf[a.id]) == 0 && time.Since(laterOf(a.seen, in.down)) > in.cfg.ActorIdle {
			in.leave(a)
			in.admit()
		}
		in.mu.Unlock()
	}
}
