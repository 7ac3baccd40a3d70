// Command trajring runs trajring's main jobs from the command line.
//
// Usage:
//
//	trajring demo [flags]   collect CartPole experience while a learner samples
//	trajring bench [flags]  measure the engine next to the copy ceiling and peers
//	trajring train [flags]  train DQN on CartPole-v1 from a prioritized table
//
// Run a subcommand with -h for its flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// commands maps subcommand names to their entry points; files of this
// package add theirs in init.
var commands = map[string]command{
	"demo": {run: runDemo, summary: "collect CartPole experience while a learner samples it"},
}

type command struct {
	run     func(args []string, stdout, stderr io.Writer) error
	summary string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "trajring: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := c.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "trajring %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: trajring <command> [flags]")
	for _, name := range []string{"demo", "bench", "train"} {
		if c, ok := commands[name]; ok {
			fmt.Fprintf(w, "  %-6s %s\n", name, c.summary)
		}
	}
}
