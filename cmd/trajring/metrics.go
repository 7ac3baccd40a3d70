package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/observer"
)

// metricsFlags are the -metrics flags of the commands that collect
// experience (demo, train): an observer.MetricsLog of the collection's
// average return, episode length, env steps and episodes, written as JSON
// lines or CSV and optionally logged through log/slog.
type metricsFlags struct {
	file, format string
	every        int64
	log          bool
}

// register adds the flags to fs.
func (m *metricsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.file, "metrics", "", "write average return, episode length, env steps and episodes to this file")
	fs.StringVar(&m.format, "metrics-format", "", "format of -metrics: jsonl or csv (default: csv for a .csv file, else jsonl)")
	fs.Int64Var(&m.every, "metrics-every", 0, "env steps between -metrics records (0: a hundredth of the run's steps)")
	fs.BoolVar(&m.log, "metrics-log", false, "also log each -metrics record through log/slog on stderr")
}

// validate checks the flags and fills in the defaults of a run of steps
// env steps.
func (m *metricsFlags) validate(steps int64) error {
	if m.every < 0 {
		return usageErrorf("-metrics-every must not be negative, got %d", m.every)
	}
	if m.format == "" {
		m.format = "jsonl"
		if strings.HasSuffix(strings.ToLower(m.file), ".csv") {
			m.format = "csv"
		}
	}
	if _, err := observer.ParseMetricsFormat(m.format); err != nil {
		return usageErrorf("-metrics-format: unknown format %q (want jsonl or csv)", m.format)
	}
	if m.every == 0 {
		m.every = max(steps/100, 1)
	}
	return nil
}

// open begins the -metrics file and its MetricsLog over rows env rows;
// with no -metrics it returns neither. The file is written atomically: its
// records go to a temporary file beside it, which finishMetrics puts in
// place (keeping the mode of a file it replaces); the caller defers Close,
// which abandons it on the error paths.
func (m *metricsFlags) open(rows int, stderr io.Writer) (*observer.MetricsLog, *atomicfile.File, error) {
	if m.file == "" {
		return nil, nil, nil
	}
	format, err := observer.ParseMetricsFormat(m.format)
	if err != nil {
		return nil, nil, err
	}
	f, err := atomicfile.Create(m.file, 0o666)
	if err != nil {
		return nil, nil, fmt.Errorf("-metrics: %w", err)
	}
	cfg := observer.MetricsLogConfig{BatchSize: rows, Every: m.every, Format: format}
	if m.log {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	log, err := observer.NewMetricsLog(f, cfg)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return log, f, nil
}

// finishMetrics flushes the log and puts its file in place (both may be
// nil).
func finishMetrics(log *observer.MetricsLog, f *atomicfile.File) error {
	if log == nil {
		return nil
	}
	if err := log.Flush(); err != nil {
		return err
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("-metrics: %w", err)
	}
	return nil
}
