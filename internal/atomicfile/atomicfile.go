// Package atomicfile replaces files so that a crash or kill at any moment
// leaves at a path either the previous file or the new one, never a mix:
// the checkpoints of tensorbuf, remote and agents/dqn are written this way.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes path's new contents through write: into a temporary file in
// the same directory (named "." + base name + ".tmp-*", mode 0600), which
// is synced, renamed over path, and then the directory is synced. A failed
// write removes the temporary file and leaves path as it was; a killed
// process may leave the temporary file behind, never a partial path. The
// error of write is returned as it is. Write is safe for concurrent use,
// though concurrent writes of one path race for the rename.
func Write(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// WriteBytes writes data to path as Write does.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
