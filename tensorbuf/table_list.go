package tensorbuf

// TableNames returns the names of the buffer's tables in the order they
// were created (or loaded). Safe for concurrent use; the slice is the
// caller's.
func (b *Buffer) TableNames() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := make([]string, 0, len(b.tableList))
	for _, t := range b.tableList {
		names = append(names, t.cfg.Name)
	}
	return names
}
