package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"
	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/tensorbuf"
)

// newExportCmd returns the export command: a checkpoint's transitions as
// a NumPy .npz archive.
func newExportCmd() *cobra.Command {
	var out, mode string
	cmd := &cobra.Command{
		Use:   "export CHECKPOINT -o FILE.npz",
		Short: "write a checkpoint's transitions as a NumPy .npz archive",
		Long: `Loads a trajring checkpoint (Buffer.SaveFile, trajring train's replay-*.ckpt,
trajring serve's buffer-NNNNNN.ckpt) into a CPU buffer and writes every stored
transition, oldest first, to -o in NumPy's .npz format (Buffer.ExportNPZ):
observation/NAME, next_observation/NAME, action/NAME, policy_info/NAME per
field, reward, discount, is_done (0 running, 1 terminated, 2 truncated), row
and step. -mode says how they are shaped, as MATLAB's allExperiences:
batch [N, 1, ...], sequence [1, N, ...], none [N, 1, 1, ...] (N experiences
of one step each). In Python: numpy.load("data.npz")["reward"].

-o is replaced atomically (a failed or killed export leaves the old file),
keeping its mode (a new file gets os.Create's, 0644 under the usual umask);
an -o that is the checkpoint itself (the same file, by any path) or a
directory is refused, and nothing is written.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want one CHECKPOINT file, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var m tensorbuf.ExportMode
			switch mode {
			case "none":
				m = tensorbuf.ExportNone
			case "batch":
				m = tensorbuf.ExportBatch
			case "sequence":
				m = tensorbuf.ExportSequence
			default:
				return usageErrorf("-mode %q: want none, batch or sequence", mode)
			}
			if out == "" {
				return usageErrorf("-o: name the .npz file to write")
			}
			if err := checkExportOut(args[0], out); err != nil {
				return err
			}
			b, err := tensorbuf.LoadFile(args[0], tensorbuf.LoadOptions{Backend: cpu.New()})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			defer b.Close()
			// Atomically, so a failed export leaves no partial archive
			// under the name asked for, with the mode of the file it
			// replaces (os.Create's for a new one).
			var n int
			err = atomicfile.Replace(out, 0o666, func(w io.Writer) error {
				var err error
				if n, err = b.ExportNPZ(w, m); err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d transitions (%s mode)\n", out, n, mode)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "out", "o", "", "the .npz file to write")
	f.StringVar(&mode, "mode", "batch", "how transitions are shaped: none, batch or sequence (as MATLAB's allExperiences)")
	return cmd
}

// checkExportOut refuses an output that would destroy the input (the same
// file, by inode, under any name) or that is a directory.
func checkExportOut(in, out string) error {
	ost, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("-o %s: %w", out, err)
	}
	if ost.IsDir() {
		return usageErrorf("-o %s is a directory: name the .npz file to write", out)
	}
	if ist, err := os.Stat(in); err == nil && os.SameFile(ist, ost) {
		return usageErrorf("-o %s is the checkpoint %s itself: name another file for the .npz", out, in)
	}
	return nil
}
