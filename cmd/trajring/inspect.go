package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/trajring/trajring/tensorbuf"
)

// newInspectCmd returns the inspect command.
func newInspectCmd() *cobra.Command {
	var verify bool
	cmd := &cobra.Command{
		Use:   "inspect FILE|DIR",
		Short: "print a checkpoint's specs, rows, tables and sizes",
		Long: `Prints the summary of a trajring checkpoint (written by Buffer.Save/SaveFile, or
the replay-*.ckpt files of trajring train -checkpoint-every): format version,
rows and capacity, bytes per step and of the arenas, the fields, the rows'
cursors, and every table (selector, items, inserts, samples, rate limiter).

It reads the header, rows and tables, and the chunk headers of the rest to
check that the file is as long as they say (a truncated file fails), so it is
fast on large checkpoints but does not check the arenas' chunks' contents or
checksums; -verify also loads the whole checkpoint
(every chunk's checksum and the metadata) into a CPU buffer, which needs as much
memory as the buffer itself. A file that is missing, not a checkpoint, truncated
or corrupt fails with one line naming what is wrong and exit status 1.

Given the directory of a file-backed buffer (tensorbuf.Config.Dir), it prints
the same summary as of the buffer's last sync, read from its state file
without opening the buffer (it may be open in another process); -verify then
opens the buffer (which needs it closed elsewhere), checking every file's
header and length and the step metadata.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want one checkpoint FILE or buffer DIR, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			if st.IsDir() {
				return inspectDir(cmd, path, verify)
			}
			info, err := tensorbuf.ReadCheckpointInfoFile(path)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			length, err := checkpointLength(path)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if verify {
				b, err := tensorbuf.LoadFile(path, tensorbuf.LoadOptions{})
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				if err := b.Close(); err != nil {
					return errors.Join(fmt.Errorf("%s: closing the loaded buffer", path), err)
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: %d bytes\n", path, st.Size())
			if extra := st.Size() - length; extra > 0 {
				fmt.Fprintf(out, "note: %d bytes after the checkpoint's end (Load ignores them)\n", extra)
			}
			fmt.Fprint(out, info)
			if verify {
				fmt.Fprintln(out, "verified: every chunk's checksum and the metadata check out")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&verify, "verify", false, "also load the whole checkpoint, checking every chunk")
	return cmd
}

// checkpointLength returns the bytes the checkpoint file at path spans
// (tensorbuf.CheckpointLength), ErrCorrupt for a truncated file.
func checkpointLength(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return tensorbuf.CheckpointLength(f, st.Size())
}
