package tensorbuf

import (
	"io"

	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// CheckpointLength returns the number of bytes the checkpoint at the
// start of r spans, found from its file header and chunk headers alone:
// each chunk header gives its payload's stored size, so the walk reads 24
// bytes per chunk and skips every payload, up to the last chunk of the
// end section. r holds size bytes. A checkpoint that runs past size (a
// truncated file) or whose chunk headers are malformed or out of order is
// ErrCorrupt, naming the section and chunk; a read error is returned
// wrapped. It accepts the streams of Save and Hindsight.Save. Bytes after the end section are not part of the checkpoint (Load
// stops before them): the result is then less than size.
//
// It checks neither checksums nor contents (Load does): it is the cheap
// check that a file is whole, for summaries such as ReadCheckpointInfo's
// that stop before the arenas. It is safe for concurrent use when r is.
func CheckpointLength(r io.ReaderAt, size int64) (int64, error) {
	return ckptio.Length(r, size)
}
