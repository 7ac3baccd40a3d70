package cpu

// PageAdvice is the page-size advice MapFile gives the kernel for a file
// mapping before its first touch. A plain value.
type PageAdvice int

const (
	// NoAdvice leaves the kernel's defaults.
	NoAdvice PageAdvice = iota
	// SmallPages (MADV_RANDOM) gives the mapping 4 KiB page-cache folios
	// and no read-ahead: one scattered dirty byte then writes back 4 KiB
	// and one cold random read reads as much, where 2 MiB folios would
	// move 2 MiB (measured on this machine kind: 1% scattered dirt of
	// 1 GiB wrote 999 MiB with 2 MiB folios, 10 MiB with MADV_RANDOM). For
	// mappings larger than memory.
	SmallPages
	// HugePages (MADV_HUGEPAGE) asks for 2 MiB page-cache folios, which
	// file systems with large folios give (ext4 on kernel 6.18 does, for
	// pages first written through the mapping): resident random reads
	// then cost what anonymous huge pages do. For mappings that stay
	// resident.
	HugePages
)
