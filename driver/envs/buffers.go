package envs

import (
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// buffers is the pair of time steps a batched environment fills in turn,
// so that the time step it returned last stays valid while it writes the
// next one.
type buffers struct {
	bufs [2]*driver.TimeStep
	cur  int // index of the current time step; -1 before Reset
}

func newBuffers(obsSpec []tensorbuf.Field, batch int) (buffers, error) {
	b := buffers{cur: -1}
	for k := range b.bufs {
		ts, err := driver.NewTimeStep(obsSpec, batch)
		if err != nil {
			return b, err
		}
		b.bufs[k] = ts
	}
	return b, nil
}

// current returns the current time step or nil before Reset.
func (b *buffers) current() *driver.TimeStep {
	if b.cur < 0 {
		return nil
	}
	return b.bufs[b.cur]
}

// next returns the buffer to write the next time step into.
func (b *buffers) next() *driver.TimeStep { return b.bufs[1-max(b.cur, 0)] }

// advance makes the buffer returned by next the current one.
func (b *buffers) advance() *driver.TimeStep {
	b.cur = 1 - max(b.cur, 0)
	return b.bufs[b.cur]
}

var (
	_ driver.Environment = (*CartPole)(nil)
	_ driver.Environment = (*Counting)(nil)
	_ driver.Environment = (*Noop)(nil)
	_ driver.Env         = (*CartPoleEnv)(nil)
	_ driver.Env         = NoopEnv{}
)
