package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// File is a file being written to replace path atomically (Create): its
// bytes go to a temporary file in path's directory, and Commit puts them
// in place. Until Commit, path keeps its old contents (or stays absent);
// a process killed before Commit returns leaves at most a temporary file
// behind, never a partial path. A File is not safe for concurrent use.
type File struct {
	f    *os.File
	path string
	done bool
}

// Create begins replacing path. The temporary file ("." + base name +
// ".tmp-*", in path's directory) gets the permission bits of the file at
// path when there is one, so that a replaced file keeps its mode, and
// otherwise perm less the umask, as os.OpenFile (os.Create: perm 0666)
// gives a new file. A path that is a directory is refused, and nothing
// is created.
func Create(path string, perm fs.FileMode) (*File, error) {
	replacing := false
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return nil, &fs.PathError{Op: "write", Path: path, Err: errors.New("is a directory")}
		}
		perm, replacing = st.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	} else {
		perm = perm.Perm()
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		if err != nil {
			return nil, err
		}
		if replacing {
			// The umask does not apply to a replaced file's mode.
			if err := f.Chmod(perm); err != nil {
				f.Close()
				os.Remove(name)
				return nil, err
			}
		}
		return &File{f: f, path: path}, nil
	}
}

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	if f.done {
		return 0, fmt.Errorf("atomicfile: write to %s after Commit or Close", f.path)
	}
	return f.f.Write(p)
}

// Commit syncs the temporary file, renames it over path and syncs the
// directory. On failure the temporary file is removed and path is as it
// was. After Commit, successful or not, Close does nothing.
func (f *File) Commit() (err error) {
	if f.done {
		return fmt.Errorf("atomicfile: %s committed or closed already", f.path)
	}
	f.done = true
	name := f.f.Name()
	defer func() {
		if err != nil {
			_ = f.f.Close()
			_ = os.Remove(name)
		}
	}()
	if err = f.f.Sync(); err != nil {
		return err
	}
	if err = f.f.Close(); err != nil {
		return err
	}
	if err = os.Rename(name, f.path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(f.path))
}

// Close abandons a File that was not committed: it closes and removes the
// temporary file, leaving path as it was. After Commit it does nothing.
// It returns nil.
func (f *File) Close() error {
	if f.done {
		return nil
	}
	f.done = true
	_ = f.f.Close()
	_ = os.Remove(f.f.Name())
	return nil
}

// Replace writes path's new contents through write, as Write does, with
// the permission bits of Create: those of the file it replaces, else perm
// less the umask. The error of write is returned as it is.
func Replace(path string, perm fs.FileMode, write func(io.Writer) error) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Commit()
}

// syncDir syncs directory dir, so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
