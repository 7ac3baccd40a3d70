package tensorbuf

import "fmt"

// String returns the mode's name, such as "batch" (MATLAB's
// ConcatenateMode "none", "batch", "sequence").
func (m ExportMode) String() string {
	switch m {
	case ExportNone:
		return "none"
	case ExportBatch:
		return "batch"
	case ExportSequence:
		return "sequence"
	}
	return fmt.Sprintf("ExportMode(%d)", int(m))
}

// String returns the mode's name, "at-episode-end" or "at-sample".
func (m RelabelMode) String() string {
	switch m {
	case RelabelAtEpisodeEnd:
		return "at-episode-end"
	case RelabelAtSample:
		return "at-sample"
	}
	return fmt.Sprintf("RelabelMode(%d)", int(m))
}
