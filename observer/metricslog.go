package observer

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/trajring/trajring/driver"
)

// ErrMetricsWrite reports a MetricsLog record that could not be written
// to its writer; the metrics themselves have been updated.
var ErrMetricsWrite = errors.New("observer: writing metrics failed")

// MetricsFormat is the file format of a MetricsLog.
type MetricsFormat int

const (
	// JSONLines writes one JSON object per record and line.
	JSONLines MetricsFormat = iota + 1
	// CSV writes a header line, then one comma-separated line per record.
	CSV
)

// String returns "jsonl" or "csv".
func (f MetricsFormat) String() string {
	switch f {
	case JSONLines:
		return "jsonl"
	case CSV:
		return "csv"
	}
	return fmt.Sprintf("MetricsFormat(%d)", int(f))
}

// ParseMetricsFormat returns the format named "jsonl" (or "json") or "csv".
func ParseMetricsFormat(s string) (MetricsFormat, error) {
	switch s {
	case "jsonl", "json":
		return JSONLines, nil
	case "csv":
		return CSV, nil
	}
	return 0, fmt.Errorf("%w: unknown metrics format %q (want jsonl or csv)", ErrConfig, s)
}

// MetricsRecord is one record of a MetricsLog: the values of the metric
// observers EnvironmentSteps, NumberOfEpisodes, AverageReturn and
// AverageEpisodeLength (cumulative results) after a step.
type MetricsRecord struct {
	EnvSteps             int64   `json:"env_steps"`
	Episodes             int64   `json:"episodes"`
	AverageReturn        float64 `json:"average_return"`
	AverageEpisodeLength float64 `json:"average_episode_length"`
}

// metricsColumns are the CSV header, in MetricsRecord's order.
var metricsColumns = []string{"env_steps", "episodes", "average_return", "average_episode_length"}

// MetricsLogConfig configures a MetricsLog.
type MetricsLogConfig struct {
	// BatchSize is the number of rows of the trajectories (> 0).
	BatchSize int
	// Window is the number of episodes the averages are taken over
	// (TF-Agents' buffer_size); 0 means 100.
	Window int
	// Every writes a record after the step at which at least Every
	// environment steps (summed over rows) have been observed since the
	// previous record (> 0).
	Every int64
	// Format is JSONLines or CSV; 0 means JSONLines.
	Format MetricsFormat
	// Logger, when set, receives every record written as an Info message
	// "metrics" with the record's fields, and write failures as Error
	// messages.
	Logger *slog.Logger
}

// MetricsLog is an observer that feeds TF-Agents' four standard metrics
// (EnvironmentSteps, NumberOfEpisodes, AverageReturn and
// AverageEpisodeLength, with the semantics of this package's observers
// of those names) and writes their values to an io.Writer periodically,
// as JSON lines or CSV, optionally logging each record through log/slog.
//
// A record is written after the step at which Every or more environment
// steps have been observed since the previous record; Flush writes the
// current values if steps were observed since then. Records are written
// in the order they are taken; the writer is not closed by MetricsLog.
//
// A MetricsLog is safe for concurrent use: calls are serialised, and
// Record may be read while a driver observes.
type MetricsLog struct {
	mu       sync.Mutex
	w        io.Writer
	cfg      MetricsLogConfig
	scratch  bytes.Buffer
	header   bool
	steps    EnvironmentSteps
	episodes NumberOfEpisodes
	ret      *AverageReturn
	length   *AverageEpisodeLength
	written  int64 // env steps at the latest record
	records  int64
}

// NewMetricsLog returns a MetricsLog writing to w. A nil w, a
// non-positive BatchSize or Every, a negative Window or an unknown Format
// is refused with ErrConfig.
func NewMetricsLog(w io.Writer, cfg MetricsLogConfig) (*MetricsLog, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: MetricsLog: nil writer", ErrConfig)
	}
	if cfg.Window == 0 {
		cfg.Window = 100
	}
	if cfg.Format == 0 {
		cfg.Format = JSONLines
	}
	if cfg.BatchSize <= 0 || cfg.Every <= 0 || cfg.Window < 0 {
		return nil, fmt.Errorf("%w: MetricsLog: batch size %d, window %d and every %d must be positive",
			ErrConfig, cfg.BatchSize, cfg.Window, cfg.Every)
	}
	if cfg.Format != JSONLines && cfg.Format != CSV {
		return nil, fmt.Errorf("%w: MetricsLog: unknown format %v", ErrConfig, cfg.Format)
	}
	m := &MetricsLog{w: w, cfg: cfg}
	var err error
	if m.ret, err = NewAverageReturn(cfg.BatchSize, cfg.Window); err != nil {
		return nil, err
	}
	if m.length, err = NewAverageEpisodeLength(cfg.BatchSize, cfg.Window); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe updates the metrics with the trajectory and writes a record
// when Every steps have passed since the previous one. A malformed
// trajectory (see AverageReturn.Observe) is refused with ErrTrajectory
// and changes nothing; a failed write returns ErrMetricsWrite (the
// metrics keep the trajectory, and the next record is attempted after
// the next step).
func (m *MetricsLog) Observe(t *driver.Trajectory) error {
	if err := checkMetricTrajectory("MetricsLog", t, m.cfg.BatchSize); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// The trajectory has been checked against every rule of the four
	// metrics, so none of them can refuse it now.
	for _, o := range []driver.Observer{&m.steps, &m.episodes, m.ret, m.length} {
		if err := o.Observe(t); err != nil {
			return err
		}
	}
	if m.steps.Result()-m.written >= m.cfg.Every {
		return m.write()
	}
	return nil
}

// Flush writes a record of the current values when steps were observed
// since the previous record (or none was written yet). Call it when collection ends. A failed write returns
// ErrMetricsWrite.
func (m *MetricsLog) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == 0 || m.steps.Result() != m.written {
		return m.write()
	}
	return nil
}

// Record returns the current values of the metrics.
func (m *MetricsLog) Record() MetricsRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.record()
}

// Records returns the number of records written.
func (m *MetricsLog) Records() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records
}

func (m *MetricsLog) record() MetricsRecord {
	return MetricsRecord{
		EnvSteps:             m.steps.Result(),
		Episodes:             m.episodes.Result(),
		AverageReturn:        m.ret.Result(),
		AverageEpisodeLength: m.length.Result(),
	}
}

// write writes the current record in one Write call; m.mu is held. The
// line is built in a scratch buffer, so a failed Write leaves no sticky
// error behind and the next record is written in full (header included
// for CSV when it was not written yet).
func (m *MetricsLog) write() error {
	r := m.record()
	m.scratch.Reset()
	var err error
	if m.cfg.Format == JSONLines {
		err = json.NewEncoder(&m.scratch).Encode(r)
	} else {
		cw := csv.NewWriter(&m.scratch)
		if !m.header {
			_ = cw.Write(metricsColumns) // writes to memory: cannot fail
		}
		_ = cw.Write([]string{
			strconv.FormatInt(r.EnvSteps, 10),
			strconv.FormatInt(r.Episodes, 10),
			strconv.FormatFloat(r.AverageReturn, 'g', -1, 64),
			strconv.FormatFloat(r.AverageEpisodeLength, 'g', -1, 64),
		})
		cw.Flush()
		err = cw.Error()
	}
	if err == nil {
		_, err = m.w.Write(m.scratch.Bytes())
	}
	if err != nil {
		if m.cfg.Logger != nil {
			m.cfg.Logger.Error("metrics", "error", err)
		}
		return fmt.Errorf("%w: %v", ErrMetricsWrite, err)
	}
	m.header = true
	m.records++
	m.written = r.EnvSteps
	if m.cfg.Logger != nil {
		m.cfg.Logger.Info("metrics", "env_steps", r.EnvSteps, "episodes", r.Episodes,
			"average_return", r.AverageReturn, "average_episode_length", r.AverageEpisodeLength)
	}
	return nil
}
