package main

import (
	"fmt"
	"io"

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
of one step each). In Python: numpy.load("data.npz")["reward"].`,
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
			b, err := tensorbuf.LoadFile(args[0], tensorbuf.LoadOptions{Backend: cpu.New()})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			defer b.Close()
			// Atomically, so a failed export leaves no partial archive
			// under the name asked for.
			var n int
			err = atomicfile.Write(out, func(w io.Writer) error {
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
