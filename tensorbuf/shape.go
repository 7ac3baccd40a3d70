package tensorbuf

import (
	"fmt"
	"strconv"
	"strings"
)

// checkShape checks the shape of a host tensor holding n rows of field f
// and returns an error wrapping ErrShape that names the field, the shape
// wanted and the shape given, such as
//
//	field "obs": want shape [4 3] (4 rows x [3]), got [3]
func checkShape(f Field, n int, got []int) error {
	ok := len(got) == len(f.Shape)+1 && got[0] == n
	for i := 0; ok && i < len(f.Shape); i++ {
		ok = got[i+1] == f.Shape[i]
	}
	if ok {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrShape, ShapeMismatch(f, n, got))
}

// ShapeMismatch describes a tensor of shape got given for n rows of field
// f: `field "obs": want shape [4 3] (4 rows x [3]), got [3]`; a scalar
// field reads `want shape [4] (4 rows of scalars)`. It is safe for
// concurrent use.
func ShapeMismatch(f Field, n int, got []int) string {
	want := append([]int{n}, f.Shape...)
	per := "of scalars"
	if len(f.Shape) > 0 {
		per = "x " + formatShape(f.Shape)
	}
	rows := "rows"
	if n == 1 {
		rows = "row"
	}
	return fmt.Sprintf("field %q: want shape %s (%d %s %s), got %s", f.Name, formatShape(want), n, rows, per, formatShape(got))
}

// formatShape writes a shape as [4 3], and a scalar's as [].
func formatShape(s []int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.Itoa(d))
	}
	sb.WriteByte(']')
	return sb.String()
}
