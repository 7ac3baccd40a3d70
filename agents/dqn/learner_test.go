package dqn

import (
	"errors"
	"testing"
)

// TestTrainConfigBackend: Validate takes "", default and cpu, takes gpu
// only in a trajring_cuda build, and refuses anything else with a
// *FieldError naming Backend.
func TestTrainConfigBackend(t *testing.T) {
	for _, tc := range []struct {
		backend string
		ok      bool
	}{
		{"", true}, {BackendDefault, true}, {BackendCPU, true}, {BackendGPU, gpuBuild}, {"GPU", false}, {"tpu", false},
	} {
		c := DefaultTrainConfig()
		c.Backend = tc.backend
		err := c.Validate()
		var fe *FieldError
		if tc.ok && err != nil {
			t.Errorf("Backend %q: %v, want no error", tc.backend, err)
		}
		if !tc.ok && (!errors.As(err, &fe) || fe.Field != "Backend" || !errors.Is(err, ErrConfig)) {
			t.Errorf("Backend %q: %v, want a FieldError of Backend", tc.backend, err)
		}
	}
}
