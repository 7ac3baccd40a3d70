package remote

import (
	"github.com/trajring/trajring/driver"
	"gorgonia.org/tensor"
)

type trajT = driver.Trajectory

func tensorNew(rows, n int) *tensor.Dense {
	return tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(rows, n))
}
