package remote

// dbgCounters are temporary measurement counters (to be removed).
type dbgCounters struct {
	ExpStream, ExpFull, ExpQuiet  int64
	HoldRefWaiting, HoldRefReady  int64
	WaitingDropped, ByeNoActor    int64
	JoinLateFirst, AdmitLateFirst int64
	IdleLeaves, StalledLeaves     int64
	GapProcess, GapSeqNotNext     int64
	CutFailed, MaxHeldN, MaxHeldB int64
	Redelivered                   int64
}
