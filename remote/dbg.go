package remote

import "time"

// temporary measurement
type dbgCounters struct {
	IdleLeaves, StalledLeaves, Rejoins int64
	cause                             map[uint64]string
	Log                               []string
}

func (in *Ingester) dbgLeave(id uint64, why string) {
	if in.dbg.cause == nil {
		in.dbg.cause = map[uint64]string{}
	}
	in.dbg.cause[id] = why + " at " + time.Now().Format("15:04:05.000")
}
