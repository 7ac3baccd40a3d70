package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interruptedError is the error of a job stopped by SIGINT (Ctrl-C) or
// SIGTERM after it finished cleanly what it documents doing then: run
// prints it as one line and exits with 128 + the signal's number (130 for
// SIGINT, 143 for SIGTERM), as a shell reports a process the signal
// killed.
type interruptedError struct {
	sig syscall.Signal
	msg string // what the job left behind, for the one line
}

func (e *interruptedError) Error() string {
	name := "SIGTERM"
	if e.sig == syscall.SIGINT {
		name = "SIGINT"
	}
	if e.msg == "" {
		return "interrupted (" + name + ")"
	}
	return "interrupted (" + name + "): " + e.msg
}

// status returns the exit status.
func (e *interruptedError) status() int { return 128 + int(e.sig) }

// signals is a context cancelled at the first SIGINT or SIGTERM. Only the
// first is caught: after it the signals' default action is back, so a
// second Ctrl-C ends a process whose clean stop hangs at once.
type signals struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan os.Signal
	done   chan struct{}
	once   sync.Once

	mu  sync.Mutex
	got syscall.Signal // 0 until a signal came
}

// catchSignals starts catching SIGINT and SIGTERM; call stop when the job
// ends.
func catchSignals(parent context.Context) *signals {
	if parent == nil {
		parent = context.Background()
	}
	s := &signals{ch: make(chan os.Signal, 1), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(parent)
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-s.ch:
			signal.Stop(s.ch)
			s.mu.Lock()
			if ss, ok := sig.(syscall.Signal); ok {
				s.got = ss
			} else {
				s.got = syscall.SIGINT
			}
			s.mu.Unlock()
			s.cancel()
		case <-s.done:
		}
	}()
	return s
}

// context returns the job's context: done at the first signal.
func (s *signals) context() context.Context { return s.ctx }

// caught returns the signal that stopped the job, or 0.
func (s *signals) caught() syscall.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// stop stops catching the signals and cancels the context.
func (s *signals) stop() {
	s.once.Do(func() {
		signal.Stop(s.ch)
		close(s.done)
		s.cancel()
	})
}

// interrupted returns the interruptedError of the caught signal with the
// message format, args (what the job left behind), or nil if no signal
// came.
func (s *signals) interrupted(format string, args ...any) error {
	sig := s.caught()
	if sig == 0 {
		return nil
	}
	return &interruptedError{sig: sig, msg: fmt.Sprintf(format, args...)}
}
