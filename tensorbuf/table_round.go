package tensorbuf

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
)

// A Round is a recorded sequence of a DeviceSelection table's device work
// (transition samples, SampleTransitionsInto, and device priority
// updates, UpdatePrioritiesDevice) that the caller captured as a CUDA
// graph (gpu.Backend.CaptureGraph) between Table.BeginRound and
// Table.EndRound, to run it with one graph launch a round (Round.Replay,
// the first time too: a capture runs nothing, so EndRound counts
// nothing). Recorded draws and updates take their Philox call, update
// epoch, live count, probability and beta from the table's round block
// in backend memory (kernels.Mirror.Round) rather than from their launch
// parameters, and Replay uploads the table's counters of the day into it
// before the launch and then counts the round's samples, calls and
// updates on the host as the direct calls would have: a replayed round
// draws the items, and writes the bytes, of the same calls made one by
// one (TestRoundReplayIsDirect).
//
// The recording stays valid while the memory its kernels read and write
// stays where it was: the table's mirror (it moves when the table
// outgrows it), its metadata mirror, and each recorded sample's
// TableTransitions memory; Replay reports a round that no longer is so
// that the caller records it again. A Round is used by one goroutine at
// a time.
type Round struct {
	t       *Table
	key     roundKey
	draws   []roundDraw
	updates uint64
	samples int64
}

// roundKey is the memory a recorded round's kernels address on the
// table's side.
type roundKey struct {
	mirror kernels.Mirror
	meta   Arena
}

// roundDraw is one recorded transition sample and the memory it wrote.
type roundDraw struct {
	tr       *TableTransitions
	n        int
	sel, out Arena
}

// roundRec is a table's recording in progress (BeginRound to EndRound):
// the counters it started from (restored by EndRound(false)) and the work
// recorded since. Guarded by the table's mutex.
type roundRec struct {
	calls   uint64
	samples int64
	epoch   uint64
	r       Round
}

// BeginRound starts recording a round on a DeviceSelection table whose
// backend keeps a round block (any ItemSelector backend; the round is
// meant for the gpu backend's graph capture, which the caller begins
// right after). It brings the device mirrors up to date (queued), fills
// the round block with the table's counters (a queued upload), and from
// then on the table's transition samples and device priority updates
// launch relative to the block. Every recorded sample must be served at
// once: one the rate limiter would make wait, one that would change the
// mirrors first (an insert or removal since BeginRound), a host-selected
// one, a device SampleInto and an UpdatePrioritiesDeviceAfter with events
// (which a graph would not record again) fail with ErrInvalidArg; one
// that would allocate (a TableTransitions on new memory or of more
// transitions) fails in the capture (the gpu backend refuses it); the
// recording stays open for EndRound. Nothing but the recording goroutine
// may use the buffer or its backend until EndRound: on the gpu backend
// other goroutines' calls fail meanwhile (gpu.ErrCapturing), as a
// capture would record their work too. It fails with ErrInvalidArg when
// the table is not a DeviceSelection table or already records, ErrClosed
// after Close. It is safe for concurrent use.
func (t *Table) BeginRound() error {
	if t.dev == nil {
		return fmt.Errorf("%w: table %q: a round needs DeviceSelection", ErrInvalidArg, t.cfg.Name)
	}
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("%w: BeginRound", ErrClosed)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dev.rec != nil {
		return fmt.Errorf("%w: table %q already records a round", ErrInvalidArg, t.cfg.Name)
	}
	if err := t.roundPrepLocked(); err != nil {
		return err
	}
	t.dev.rec = &roundRec{calls: t.calls, samples: t.samples, epoch: t.dev.epoch}
	t.dev.rec.r = Round{t: t, key: t.roundKeyLocked()}
	return nil
}

// EndRound ends the recording BeginRound started and returns it (nil
// with keep false, when the capture failed), putting the table's calls
// and samples back to what they were at BeginRound: a capture runs
// nothing, and Round.Replay counts the round when it runs it. The update
// epoch is not put back (epochs need only grow: should the recorded
// updates have run after all, on a backend that captured nothing, their
// claims stay older than the next ones). It fails with ErrInvalidArg when
// no round is recorded.
func (t *Table) EndRound(keep bool) (*Round, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.dev.recOrNil()
	if rec == nil {
		return nil, fmt.Errorf("%w: table %q records no round", ErrInvalidArg, t.cfg.Name)
	}
	t.dev.rec = nil
	t.calls, t.samples = rec.calls, rec.samples
	t.notifyLocked()
	if !keep {
		return nil, nil
	}
	r := rec.r
	return &r, nil
}

// recOrNil returns the recording in progress of a mirror, nil for none
// (or no mirror).
func (m *devMirror) recOrNil() *roundRec {
	if m == nil {
		return nil
	}
	return m.rec
}

// Replay replays the round: under the table's locks it brings the device
// mirrors up to date, uploads the table's counters into the round block
// and calls launch, which must queue the captured graph (and nothing that
// uses the table) on the table's backend stream; once launch returns nil
// it counts the round's calls, samples and updates as the direct calls
// would have (each recorded TableTransitions then reports the table's
// size and has its host slices emptied, as after a device-selected
// sample). ok is false, with nothing launched and nothing counted, when
// the round cannot be replayed now: the memory it recorded moved, or the
// table cannot serve all its samples at once (the rate limiter); the
// caller then makes the calls directly (which wait) or records a new
// round. A launch error is returned as it is with nothing counted but the
// update epochs (whether the graph ran is not known; the backend's error
// says more). It fails with ErrClosed after Close and ErrInvalidArg while
// the table records. It is safe for concurrent use with other calls on
// the table.
func (r *Round) Replay(launch func() error) (ok bool, err error) {
	t := r.t
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false, fmt.Errorf("%w: Round.Replay", ErrClosed)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dev.rec != nil {
		return false, fmt.Errorf("%w: table %q: Replay while a round is recorded", ErrInvalidArg, t.cfg.Name)
	}
	if !t.canSampleLocked(int(r.samples)) || t.dev.epoch+r.updates >= 1<<32 {
		return false, nil
	}
	if err := t.roundPrepLocked(); err != nil {
		return false, err
	}
	if t.roundKeyLocked() != r.key {
		return false, nil
	}
	for _, d := range r.draws {
		if d.tr.sel.arena != d.sel || d.tr.out.arena != d.out || d.tr.selN != d.n {
			return false, nil
		}
	}
	if err := launch(); err != nil {
		t.dev.epoch += r.updates // perhaps used: never again
		return false, err
	}
	t.calls += uint64(len(r.draws))
	t.samples += r.samples
	if r.updates > 0 {
		t.dev.epoch += r.updates
		t.dev.devSet = true
	}
	for _, d := range r.draws {
		d.tr.sawDevSample(t)
	}
	t.notifyLocked()
	return true, nil
}

// Table returns the table the round was recorded on.
func (r *Round) Table() *Table { return r.t }

// Samples returns the transitions the round samples in all, and Calls
// and Updates its sample calls and device priority updates.
func (r *Round) Samples() int64  { return r.samples }
func (r *Round) Calls() int      { return len(r.draws) }
func (r *Round) Updates() uint64 { return r.updates }

// roundPrepLocked brings the mirrors up to date (queued launches, as a
// device sample does first) and uploads the table's counters into the
// round block, allocating it the first time. The caller holds b.mu for
// reading and t.mu.
func (t *Table) roundPrepLocked() error {
	m, b := t.dev, t.b
	if err := t.flushMirrorLocked(); err != nil {
		return err
	}
	if err := t.syncMetaLocked(); err != nil {
		return err
	}
	if m.round.arena == nil {
		if _, err := m.round.ensure(b.be, roundSpecs, kernels.RoundWords); err != nil {
			return err
		}
	}
	nlive := len(t.live)
	var w [kernels.RoundWords]uint64
	w[kernels.RoundCall] = uint64(t.calls)
	w[kernels.RoundNLive] = uint64(nlive)
	if nlive > 0 {
		w[kernels.RoundProb] = math.Float64bits(1 / float64(nlive))
	}
	w[kernels.RoundBeta] = math.Float64bits(t.cfg.Beta)
	w[kernels.RoundEpoch] = m.epoch
	if err := b.be.Upload(m.round.arena, m.round.offs[0], rawbytes.Of(w[:])); err != nil {
		return fmt.Errorf("%w: round block: %w", ErrBackend, err)
	}
	return nil
}

// roundSpecs lays out a table's round block.
var roundSpecs = []outSpec{{name: "round block", dtype: Int64, stepBytes: 8}}

// roundKeyLocked returns the table-side memory of a round recorded now.
func (t *Table) roundKeyLocked() roundKey {
	return roundKey{mirror: t.dev.mirror(), meta: t.dev.meta.arena.arena}
}

// roundMirror returns the mirror a device draw or update launches on, the
// call it draws with and the epoch it updates with: the table's, or,
// while a round records, the mirror with its round block and the call
// and epoch relative to the block's bases (see Round). The caller holds
// t.mu.
func (t *Table) roundMirror() (m kernels.Mirror, call, epoch uint64) {
	m = t.dev.mirror()
	rec := t.dev.rec
	if rec == nil {
		return m, t.calls, t.dev.epoch
	}
	m.Round, m.RoundOff = t.dev.round.arena, t.dev.round.offs[0]
	return m, t.calls - rec.calls, t.dev.epoch - rec.epoch
}

// roundChangedLocked returns an error when the mirrors changed since
// BeginRound: a recorded call would patch them first, with launches the
// recording must not hold. The caller holds b.mu for reading and t.mu.
func (t *Table) roundChangedLocked() error {
	m, b := t.dev, t.b
	mm := &m.meta
	if len(m.items)+len(m.lives) > 0 || m.full || m.dirty || t.mirrorNeed() > m.slots || (m.prio != nil && int64(t.tree.n) != m.treeN) ||
		mm.arena.arena == nil || len(mm.synced) != b.numEnvs || b.stats.Steps != mm.steps || b.stats.Cuts != mm.cuts {
		return fmt.Errorf("%w: table %q changed while a round records (an insert, removal or new step since BeginRound)", ErrInvalidArg, t.cfg.Name)
	}
	return nil
}

// noteDraw records a transition sample in the round being recorded, if
// any. The caller holds t.mu.
func (t *Table) noteDraw(tr *TableTransitions, n int) {
	if rec := t.dev.rec; rec != nil {
		rec.r.draws = append(rec.r.draws, roundDraw{tr: tr, n: n, sel: tr.sel.arena, out: tr.out.arena})
		rec.r.samples += int64(n)
	}
}

// sawDevSample sets what a device-selected sample of t leaves in tr's
// host fields (see sampleTransitionsDevLocked).
func (tr *TableTransitions) sawDevSample(t *Table) {
	tr.TableSize = len(t.live)
	tr.selT = t
	tr.Items, tr.Keys, tr.Probabilities, tr.Weights, tr.Valid = tr.Items[:0], tr.Keys[:0], tr.Probabilities[:0], tr.Weights[:0], tr.Valid[:0]
	tr.Rows, tr.Steps = tr.Rows[:0], tr.Steps[:0]
}
