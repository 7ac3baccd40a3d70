package tensorbuf_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// failingReaderAt fails every read with errDisk.
type failingReaderAt struct{}

var errDisk = errors.New("disk on fire")

func (failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errDisk }

// TestCheckpointLength: the length CheckpointLength finds from the chunk
// headers is the checkpoint's, plain or compressed, with or without bytes
// after it; every shorter prefix of the file is ErrCorrupt (truncated),
// and a read error is the reader's, not ErrCorrupt.
func TestCheckpointLength(t *testing.T) {
	b := newBuffer(t, 2, 8)
	fill(t, b, newModel(2, 8), [][]rawStep{mids(2, 0), mids(2, 10), mids(2, 20)})
	if _, err := b.NewTable(tensorbuf.TableConfig{Name: "replay", MaxSize: 10}); err != nil {
		t.Fatal(err)
	}
	for _, compress := range []bool{false, true} {
		var ck bytes.Buffer
		if err := b.Save(&ck, tensorbuf.SaveOptions{Compress: compress}); err != nil {
			t.Fatal(err)
		}
		data := ck.Bytes()
		for _, extra := range []int{0, 1, 100} {
			whole := append(bytes.Clone(data), make([]byte, extra)...)
			if n, err := tensorbuf.CheckpointLength(bytes.NewReader(whole), int64(len(whole))); n != int64(len(data)) || err != nil {
				t.Errorf("compress %v, %d bytes after it: %d, %v; want %d", compress, extra, n, err, len(data))
			}
		}
		for cut := range len(data) {
			if n, err := tensorbuf.CheckpointLength(bytes.NewReader(data[:cut]), int64(cut)); !errors.Is(err, tensorbuf.ErrCorrupt) {
				t.Fatalf("compress %v, cut to %d of %d bytes: %d, %v; want ErrCorrupt", compress, cut, len(data), n, err)
			}
		}
	}
	if _, err := tensorbuf.CheckpointLength(failingReaderAt{}, 1000); !errors.Is(err, errDisk) || errors.Is(err, tensorbuf.ErrCorrupt) {
		t.Errorf("failing reader: %v, want its error, not ErrCorrupt", err)
	}
	if _, err := tensorbuf.CheckpointLength(bytes.NewReader(nil), 0); !errors.Is(err, tensorbuf.ErrCorrupt) {
		t.Errorf("empty file: %v, want ErrCorrupt", err)
	}
}
