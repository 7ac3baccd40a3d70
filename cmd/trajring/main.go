// Command trajring runs trajring's main jobs from the command line.
//
// Usage:
//
//	trajring demo [flags]                  collect CartPole experience while a learner samples
//	trajring train [flags]                 train DQN on CartPole-v1 from a prioritized table
//	trajring eval [flags] MODEL            run a saved network greedily; mean and std of the return
//	trajring bench [flags]                 measure the engine next to the copy ceiling and peers
//	trajring inspect [flags] FILE          summarise (or -verify) a checkpoint
//	trajring export [flags] FILE -o F.npz  write a checkpoint's transitions for NumPy
//	trajring serve [flags]                 a learner fed by remote actors over NATS JetStream
//	trajring actor [flags]                 collect and publish to a serve learner
//	trajring version                       print the module and Go versions
//
// Run a command with -h for its flags. Flags take one dash or two
// (-steps 1000 and --steps=1000 are the same). A usage error (an unknown
// command or flag, a bad flag value) prints one message naming what was
// wrong and exits with status 2; a failure of the job itself exits with
// status 1. A job stopped by Ctrl-C (SIGINT) or SIGTERM that catches it
// (demo, bench, serve, actor) finishes what it documents for that case,
// prints one line saying so and exits with status 130 (SIGINT) or 143
// (SIGTERM); a second signal ends it at once.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// commands are the constructors of the subcommands, in the order of the
// help. A new command (inspect, serve, actor) lives in its own file with
// a newXCmd constructor and is added here.
var commands = []func() *cobra.Command{
	newDemoCmd,
	newBenchCmd,
	newTrainCmd,
	newEvalCmd,
	newInspectCmd,
	newExportCmd,
	newServeCmd,
	newActorCmd,
	newVersionCmd,
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command line that cannot run: it exits with status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usageError; name the flag at fault in it.
func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// runError is a failure of a command's job: it exits with status 1.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// newRootCmd builds the command tree.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	cobra.EnableCommandSorting = false // the order of commands
	root := &cobra.Command{
		Use:   "trajring",
		Short: "trajring: an RL replay-buffer engine (collect, sample, benchmark, train)",
		Long: "trajring collects reinforcement-learning experience from batched environments into a ring\n" +
			"buffer of tensors and hands it to training loops as sampled batches.\n\n" +
			"Flags take one dash or two (-steps 1000 or --steps=1000).",
		SilenceErrors: true, // run prints the one error message
		SilenceUsage:  true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, newCmd := range commands {
		c := newCmd()
		if body := c.RunE; body != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				err := body(cmd, args)
				var u *usageError
				if err == nil || errors.As(err, &u) {
					return err
				}
				return &runError{err}
			}
		}
		root.AddCommand(c)
	}
	return root
}

// run executes the command line args and returns the exit status: 0, 1
// when the job failed, 2 on a usage error, 128 + the signal's number for
// a job stopped by SIGINT or SIGTERM (interruptedError). Help goes to
// stdout; errors, one message each, to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		return 2
	}
	root.SetArgs(longFlags(root, args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	var intr *interruptedError
	if errors.As(err, &intr) {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), intr)
		return intr.status()
	}
	var fail *runError
	if errors.As(err, &fail) {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), fail.err)
		return 1
	}
	msg := unknownFlag(cmd, args, strings.TrimSpace(err.Error()))
	fmt.Fprintf(stderr, "%s: %s (see '%s -h')\n", cmd.CommandPath(), msg, cmd.CommandPath())
	return 2
}

// longFlags rewrites Go-style long flags with one dash (-envs 8,
// -steps=100, -help) to the double-dash form pflag parses, so that the
// command lines of the flag-package CLI keep working and an unknown one
// is reported by its name. Single-letter shorthands (-h), negative
// numbers, flag values (the argument after a flag that takes one) and
// anything after "--" are left alone.
func longFlags(root *cobra.Command, args []string) []string {
	out := slices.Clone(args)
	cmd := root
	value := false // out[i] is the value of the flag before it
	for i, a := range out {
		if value {
			value = false
			continue
		}
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			if cmd == root {
				if c, _, err := root.Find([]string{a}); err == nil && c != nil {
					cmd = c
				}
			}
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasValue := strings.Cut(a[2:], "=")
			value = !hasValue && takesValue(cmd, name)
			continue
		}
		if len(a) <= 2 || strings.ContainsAny(a[1:2], "0123456789.") {
			continue
		}
		name, _, hasValue := strings.Cut(a[1:], "=")
		out[i] = "-" + a
		value = !hasValue && takesValue(cmd, name)
	}
	return out
}

// takesValue reports whether cmd's flag name takes a value in the next
// argument (every flag but the booleans).
func takesValue(cmd *cobra.Command, name string) bool {
	f := cmd.Flags().Lookup(name)
	return f != nil && f.NoOptDefVal == ""
}

// noArgs refuses positional arguments: the commands take flags only.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q (%s takes flags only)", args[0], cmd.CommandPath())
	}
	return nil
}
