package tensorbuf_test

import (
	"fmt"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestFileBackedExample runs the example of docs/files.md.
func TestFileBackedExample(t *testing.T) {
	if err := fileBackedExample(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

func fileBackedExample(dir string) error {
	fields := []tensorbuf.Field{{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{4}}}
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 8, Capacity: 10_000, Fields: fields, Dir: dir}) // files in dir
	if err != nil {
		return err
	}
	// ... writers, tables and samplers as with any buffer ...
	if err := buf.Sync(); err != nil { // what Open returns after a crash from now on
		return err
	}
	if err := buf.Close(); err != nil { // Close syncs too
		return err
	}
	again, err := tensorbuf.Open(dir) // rows, cursors, metadata and tables as of the last sync
	if err != nil {
		return err
	}
	defer again.Close()
	fmt.Println("steps in row 0:", again.Cursor(0))
	return nil
}
