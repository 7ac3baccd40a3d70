package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestCheckTensorsShapeMessage: a wrong shape is reported with the field,
// the shape wanted (rows x per-step shape) and the shape given.
func TestCheckTensorsShapeMessage(t *testing.T) {
	f := []tensorbuf.Field{{Name: "obs", DType: tensorbuf.Float32, Shape: []int{3}}}
	m := map[string]*tensor.Dense{"obs": tensor.New(tensor.WithShape(3), tensor.WithBacking(make([]float32, 3)))}
	err := driver.CheckTensors(f, 4, m)
	want := `field "obs": want shape [4 3] (4 rows x [3]), got [3]`
	if !errors.Is(err, driver.ErrSpec) || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("CheckTensors: %v, want ErrSpec ending %q", err, want)
	}
}
