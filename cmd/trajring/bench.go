package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/cobra"
	"github.com/trajring/trajring/bench"
)

// newBenchCmd returns the bench command: it runs the suite, prints the
// markdown table on stdout and writes the JSON report and the plots (SVG and PNG).
func newBenchCmd() *cobra.Command {
	var (
		quick, noGo         bool
		out, python, filter string
		progressEvery       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "measure the engine next to the copy ceiling and peers",
		Long: `Measures trajring next to a plain copy and a same-rows gather copy of the same bytes,
and next to NumPy, PyTorch and a slice-of-structs Go buffer, in one run. Prints a
markdown table on stdout and writes a JSON report and plots (each as SVG and
PNG) to -out, each file written whole or not at all (a temporary file renamed
into place).

Ctrl-C (SIGINT) or SIGTERM stops the run at the next measurement turn: the
Python peers' process is stopped, nothing is printed or written (files of an
earlier run in -out stay as they were), and bench exits with status 130 (143
for SIGTERM). A second Ctrl-C quits at once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if progressEvery < 0 {
				return usageErrorf("-progress must not be negative, got %v", progressEvery)
			}
			opt := bench.Options{Mode: bench.Full, Python: python, NoGoPeer: noGo}
			if quick {
				opt.Mode = bench.Quick
			}
			if filter != "" {
				re, err := regexp.Compile(filter)
				if err != nil {
					return usageErrorf("-run: %v", err)
				}
				opt.Filter = re
			}
			total := len(bench.Scenarios(opt.Mode, opt.Filter))
			prog := newProgress(stderr, "bench", "scenarios", int64(total), progressEvery)
			// Lines that stay (skips, the summary) go above the bar.
			opt.Progress = prog
			opt.Scenario = func(name string, done, _ int) { prog.set(int64(done), name) }
			sigs := catchSignals(cmd.Context())
			defer sigs.stop()
			rep, err := bench.Run(sigs.context(), opt)
			if err == nil {
				prog.set(int64(len(rep.Rows)), "")
			}
			prog.finish("")
			if ierr := sigs.interrupted("nothing written"); ierr != nil {
				return ierr
			}
			if err != nil {
				return err
			}
			if err := rep.Markdown(stdout); err != nil {
				return err
			}
			if out == "" {
				return nil
			}
			files, err := rep.Save(out)
			for _, f := range files {
				fmt.Fprintf(stderr, "bench: wrote %s\n", f)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.BoolVar(&quick, "quick", false, "run the quick subset (under two minutes; what CI runs)")
	f.StringVar(&out, "out", filepath.Join("bench", "results"), "directory for the JSON report and the SVG and PNG plots (\"\" writes none)")
	f.StringVar(&python, "python", "", "python3 for the NumPy/PyTorch peers (\"\" finds /usr/bin/python3; \"none\" skips them)")
	f.StringVar(&filter, "run", "", "only run scenarios whose name matches this regular expression")
	f.BoolVar(&noGo, "no-go-peer", false, "skip the slice-of-structs Go peer")
	f.DurationVar(&progressEvery, "progress", 5*time.Second, "progress on stderr: a bar on a terminal, else a line at this interval (0: none)")
	return cmd
}
