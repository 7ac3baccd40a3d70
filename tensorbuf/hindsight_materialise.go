package tensorbuf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// materialise gathers the transitions rows/steps (one-step, or n-step
// with cfg.NStep) into ht and writes the substituted goals, rewards,
// discounts and IsDone of those with an override; sample says a sample,
// not an export, asks (see achievedAt). The caller holds hs.mu and b.mu.
func (hs *Hindsight) materialise(ht *HindsightTransitions, rows []int, steps []int64, ov []*relabel, sample bool) error {
	b := hs.b
	tr := &ht.Transitions
	tr.Rows, tr.Steps = append(tr.Rows[:0], rows...), append(tr.Steps[:0], steps...)
	ht.Relabeled = ht.Relabeled[:0]
	some := false
	for _, rl := range ov {
		ht.Relabeled = append(ht.Relabeled, rl != nil)
		some = some || rl != nil
	}
	if hs.cfg.NStep.Horizon > 0 {
		return hs.materialiseNStep(ht, ov, some, sample)
	}
	tr.idx, tr.next = tr.idx[:0], tr.next[:0]
	for i, r := range rows {
		tr.idx = append(tr.idx, b.slot(r, steps[i]))
		tr.next = append(tr.next, b.slot(r, steps[i]+1))
	}
	if err := b.materialise(tr); err != nil {
		return err
	}
	if !some {
		return nil
	}
	n := len(rows)
	rew, disc := grow(&hs.sc.rew, n), grow(&hs.sc.disc, n)
	if err := hs.download(tr, rew, disc); err != nil {
		return err
	}
	for i, rl := range ov {
		if rl == nil {
			continue
		}
		rew[i] = rl.reward
		tr.done[i] = rl.done
		switch {
		case rl.done == Terminated:
			disc[i] = 0
		case disc[i] == 0:
			disc[i] = 1
		}
	}
	return hs.patch(tr, ov, rew, disc)
}

// materialiseNStep is materialise for n-step transitions. A real one is
// the buffer's n-step transition (see NStepOptions); a relabeled one with
// goal g looks ahead the same k_env steps and sums, instead of the stored
// rewards, Reward(achieved(t+j+1), g) for j < k, stopping after the first
// step where IsDone(achieved(t+j+1), g) holds (then IsDone is Terminated
// and the discount 0); otherwise k = k_env, the discount is gamma^k and
// IsDone is Truncated if the k-th step was, Running if not.
func (hs *Hindsight) materialiseNStep(ht *HindsightTransitions, ov []*relabel, some, sample bool) error {
	b, tr := hs.b, &ht.Transitions
	opt := hs.cfg.NStep
	h, gamma := int64(opt.Horizon), opt.DiscountFactor
	n := len(tr.Rows)
	lens := grow(&hs.sc.lens, n) // k_env per transition
	refs := hs.sc.refs[:0]
	for i, r := range tr.Rows {
		lens[i] = b.nstepLen(r, tr.Steps[i], h)
		if ov[i] != nil {
			for j := range lens[i] {
				refs = append(refs, stepRef{r, tr.Steps[i] + j + 1})
			}
		}
	}
	hs.sc.refs = refs
	goals, err := hs.achievedAt(refs, sample)
	if err != nil {
		return err
	}
	d := len(hs.ach.idx)
	rew, disc := grow(&hs.sc.rew, n), grow(&hs.sc.disc, n)
	done := grow(&hs.sc.done, n) // b.materialise rewrites tr.done
	wins := grow(&hs.sc.wins, n)
	tr.idx, tr.next = tr.idx[:0], tr.next[:0]
	at := 0 // next goal in goals
	for i, r := range tr.Rows {
		t, k := tr.Steps[i], lens[i]
		wins[i] = Window{Row: int64(r), Start: t, Len: k}
		done[i] = b.isDone(r, t+k-1)
		if rl := ov[i]; rl != nil {
			sum, g, kEnv := 0.0, 1.0, k
			terminated := false
			for j := range kEnv {
				a := goals[(at+int(j))*d : (at+int(j)+1)*d]
				sum = float64(sum + float64(g*float64(hs.cfg.Reward(a, rl.goal))))
				g = float64(g * gamma)
				if hs.cfg.IsDone(a, rl.goal) {
					k, terminated = j+1, true
					break
				}
			}
			at += int(kEnv)
			rew[i] = float32(sum)
			switch {
			case terminated:
				done[i] = Terminated
			case done[i] != Truncated:
				done[i] = Running
			}
		}
		disc[i] = 0
		if done[i] != Terminated {
			g := 1.0
			for range k {
				g = float64(g * gamma)
			}
			disc[i] = float32(g)
		}
		wins[i].Len = k
		tr.idx = append(tr.idx, b.slot(r, t))
		tr.next = append(tr.next, b.slot(r, t+k))
	}
	if err := b.materialise(tr); err != nil {
		return err
	}
	tr.done = append(tr.done[:0], done...)
	o := tr.out
	k := b.nUser + tr.nObs
	if err := b.nstepRewards(o.arena, o.offs[k], wins, gamma); err != nil {
		return err
	}
	if some {
		// Relabeled sums replace the stored-reward sums.
		sums := grow(&hs.sc.sums, n)
		if err := hs.download(tr, sums, nil); err != nil {
			return err
		}
		for i, rl := range ov {
			if rl == nil {
				rew[i] = sums[i]
			}
		}
		return hs.patch(tr, ov, rew, disc)
	}
	for _, up := range []struct {
		off int64
		raw []byte
	}{{o.offs[k+1], f32Raw(disc)}, {o.offs[k+2], tr.done}} {
		if err := b.be.Upload(o.arena, up.off, up.raw); err != nil {
			return fmt.Errorf("%w: upload: %w", ErrBackend, err)
		}
	}
	return nil
}

// download reads the rewards and (when disc is not nil) the discounts of
// materialised transitions.
func (hs *Hindsight) download(tr *Transitions, rew, disc []float32) error {
	b, o := hs.b, tr.out
	k := b.nUser + tr.nObs
	if err := b.be.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	if err := b.be.Download(f32Raw(rew), o.arena, o.offs[k]); err != nil {
		return fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	if disc == nil {
		return nil
	}
	if err := b.be.Download(f32Raw(disc), o.arena, o.offs[k+1]); err != nil {
		return fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	return nil
}

// patch writes the substituted goals into the observation and next
// observation of the overridden transitions, and uploads rewards,
// discounts and tr.done for all of them.
func (hs *Hindsight) patch(tr *Transitions, ov []*relabel, rew, disc []float32) error {
	b, o := hs.b, tr.out
	n := int64(len(ov))
	if err := b.be.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	for _, spec := range []int{hs.des.col, hs.des.nextIdx} {
		raw := grow(&hs.sc.raw, int(n*hs.des.step))
		if err := b.be.Download(raw, o.arena, o.offs[spec]); err != nil {
			return fmt.Errorf("%w: download: %w", ErrBackend, err)
		}
		for i, rl := range ov {
			if rl != nil {
				writeElems(raw[int64(i)*hs.des.step:], hs.des.dtype, hs.des.idx, rl.goal)
			}
		}
		if err := b.be.Upload(o.arena, o.offs[spec], raw); err != nil {
			return fmt.Errorf("%w: upload: %w", ErrBackend, err)
		}
	}
	k := b.nUser + tr.nObs
	for _, up := range []struct {
		off int64
		raw []byte
	}{{o.offs[k], f32Raw(rew)}, {o.offs[k+1], f32Raw(disc)}, {o.offs[k+2], tr.done}} {
		if err := b.be.Upload(o.arena, up.off, up.raw); err != nil {
			return fmt.Errorf("%w: upload: %w", ErrBackend, err)
		}
	}
	return nil
}

// readElems writes elements idx of one step of a field, as float64, to
// out.
func readElems(out []float64, raw []byte, dt DType, idx []int) {
	ne := binary.NativeEndian
	for j, e := range idx {
		switch dt {
		case Float32:
			out[j] = float64(math.Float32frombits(ne.Uint32(raw[4*e:])))
		case Float64:
			out[j] = math.Float64frombits(ne.Uint64(raw[8*e:]))
		case Int32:
			out[j] = float64(int32(ne.Uint32(raw[4*e:])))
		case Int64:
			out[j] = float64(int64(ne.Uint64(raw[8*e:])))
		case Uint8, Bool:
			out[j] = float64(raw[e])
		}
	}
}

// writeElems stores vals as elements idx of one step of a field.
func writeElems(raw []byte, dt DType, idx []int, vals []float64) {
	ne := binary.NativeEndian
	for j, e := range idx {
		v := vals[j]
		switch dt {
		case Float32:
			ne.PutUint32(raw[4*e:], math.Float32bits(float32(v)))
		case Float64:
			ne.PutUint64(raw[8*e:], math.Float64bits(v))
		case Int32:
			ne.PutUint32(raw[4*e:], uint32(int32(v)))
		case Int64:
			ne.PutUint64(raw[8*e:], uint64(int64(v)))
		case Uint8:
			raw[e] = uint8(v)
		case Bool:
			raw[e] = 0
			if v != 0 {
				raw[e] = 1
			}
		}
	}
}
