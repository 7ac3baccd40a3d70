package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"

	"github.com/trajring/trajring/bench"
)

func init() {
	commands["bench"] = command{run: benchMain, summary: "measure the engine next to the copy ceiling and peers"}
}

// benchMain parses the bench flags, runs the suite, prints the markdown
// table on stdout and writes the JSON report and the SVG plots.
func benchMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "run the quick subset (under two minutes; what CI runs)")
	out := fs.String("out", filepath.Join("bench", "results"), "directory for the JSON report and the SVG plots (\"\" writes none)")
	python := fs.String("python", "", "python3 for the NumPy/PyTorch peers (\"\" finds /usr/bin/python3; \"none\" skips them)")
	filter := fs.String("run", "", "only run scenarios whose name matches this regular expression")
	noGo := fs.Bool("no-go-peer", false, "skip the slice-of-structs Go peer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: trajring bench [flags]")
		fmt.Fprintln(stderr, "Measures trajring next to a plain copy and a same-rows gather copy of the same bytes, and next to NumPy, PyTorch and a slice-of-structs Go buffer, in one run.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	opt := bench.Options{Mode: bench.Full, Progress: stderr, Python: *python, NoGoPeer: *noGo}
	if *quick {
		opt.Mode = bench.Quick
	}
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		opt.Filter = re
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := bench.Run(ctx, opt)
	if err != nil {
		return err
	}
	if err := rep.Markdown(stdout); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	files, err := rep.Save(*out)
	for _, f := range files {
		fmt.Fprintf(stderr, "bench: wrote %s\n", f)
	}
	return err
}
