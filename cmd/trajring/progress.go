package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal; a variable so that tests
// can draw bars into a buffer.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// barThrottle is the shortest time between two draws of a bar; a
// variable so that tests can draw every update.
var barThrottle = 100 * time.Millisecond

// progress reports the advance of a long job on w. On a terminal it draws
// a progressbar bar (count, rate, elapsed time and ETA) updated in place;
// elsewhere (logs, pipes, CI) it writes a plain line at most every
// interval. An interval of 0 makes it silent. It is safe for concurrent
// use.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	bar      *progressbar.ProgressBar // nil off a terminal or when silent
	name     string                   // job name, first word of each line
	unit     string                   // what is counted ("env steps")
	total    int64
	interval time.Duration
	now      func() time.Time
	start    time.Time
	last     time.Time // of the latest plain line
	n        int64
	done     bool
}

// newProgress starts reporting a job of total units.
func newProgress(w io.Writer, name, unit string, total int64, interval time.Duration) *progress {
	p := &progress{w: w, name: name, unit: unit, total: total, interval: interval, now: time.Now}
	p.start = p.now()
	p.last = p.start
	if interval > 0 && isTerminal(w) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(name),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(barThrottle),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return p
}

// set records that n units are done; detail, when not empty, is shown
// after the counts (the bar's description on a terminal).
func (p *progress) set(n int64, detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.interval <= 0 {
		return
	}
	p.n = n
	if p.bar != nil {
		if detail != "" {
			p.bar.Describe(p.name + ": " + detail)
		}
		_ = p.bar.Set64(min(n, p.total))
		return
	}
	if now := p.now(); now.Sub(p.last) >= p.interval {
		p.last = now
		fmt.Fprintln(p.w, p.line(now, detail))
	}
}

// line is the plain progress line at now.
func (p *progress) line(now time.Time, detail string) string {
	el := now.Sub(p.start)
	s := fmt.Sprintf("%s: %d/%d %s", p.name, p.n, p.total, p.unit)
	if p.total > 0 {
		s += fmt.Sprintf(" (%.1f%%)", 100*float64(p.n)/float64(p.total))
	}
	s += fmt.Sprintf(", %s elapsed", el.Round(time.Second))
	if p.n > 0 && el > 0 {
		s += ", " + rate(float64(p.n)/el.Seconds(), p.unit)
		if p.n < p.total {
			eta := time.Duration(float64(el) * float64(p.total-p.n) / float64(p.n))
			s += fmt.Sprintf(", ETA %s", eta.Round(time.Second))
		}
	}
	if detail != "" {
		s += "; " + detail
	}
	return s
}

// println writes a line that stays (an evaluation result, a skipped
// scenario), above the bar on a terminal. It writes even when the
// progress is silent.
func (p *progress) println(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil && !p.done {
		_ = p.bar.Clear()
		fmt.Fprintln(p.w, s)
		_ = p.bar.Set64(min(p.n, p.total)) // redrawn unless throttled: then at the next set
		return
	}
	fmt.Fprintln(p.w, s)
}

// Write makes p an io.Writer of whole lines for code that reports through
// one (package bench): each line is written with println.
func (p *progress) Write(b []byte) (int, error) {
	for _, l := range splitLines(b) {
		p.println(l)
	}
	return len(b), nil
}

func splitLines(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	if start < len(b) {
		out = append(out, string(b[start:]))
	}
	return out
}

// finish ends the report: the bar shows its final count and the
// terminal moves to a new line; off a terminal, a last plain line is
// written (when not silent).
func (p *progress) finish(detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.interval <= 0 {
		p.done = true
		return
	}
	p.done = true
	if p.bar != nil {
		if detail != "" {
			p.bar.Describe(p.name + ": " + detail)
		}
		if p.n >= p.total {
			_ = p.bar.Finish()
		} else {
			_ = p.bar.Set64(p.n)
			_ = p.bar.Exit()
		}
		return
	}
	fmt.Fprintln(p.w, p.line(p.now(), detail))
}

// rate formats perSecond units a second so that a slow job does not read
// "0 scenarios/s": whole units a second from 10/s, one decimal from 1/s,
// and per minute (or per hour) below.
func rate(perSecond float64, unit string) string {
	switch {
	case perSecond >= 10:
		return fmt.Sprintf("%.0f %s/s", perSecond, unit)
	case perSecond >= 1:
		return fmt.Sprintf("%.1f %s/s", perSecond, unit)
	case perSecond*60 >= 1:
		return fmt.Sprintf("%.1f %s/min", perSecond*60, unit)
	default:
		return fmt.Sprintf("%.1f %s/h", perSecond*3600, unit)
	}
}
