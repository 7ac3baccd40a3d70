package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/trajring/trajring/tensorbuf"
)

// inspectDir prints the summary of the file-backed buffer in dir as of
// its last sync (tensorbuf.ReadFileBufferInfo); verify also opens it.
func inspectDir(cmd *cobra.Command, dir string, verify bool) error {
	info, gen, err := tensorbuf.ReadFileBufferInfo(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	var fi tensorbuf.FileInfo
	if verify {
		b, err := tensorbuf.Open(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		fi, _ = b.FileInfo()
		if err := b.Close(); err != nil {
			return errors.Join(fmt.Errorf("%s: closing the buffer", dir), err)
		}
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s: file-backed buffer, sync generation %d\n", dir, gen)
	fmt.Fprint(out, info)
	if verify {
		fmt.Fprintf(out, "verified: opened (%d bytes of files), every file's header and length and the metadata check out\n", fi.FileBytes)
	}
	return nil
}
