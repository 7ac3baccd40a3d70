// Package tensorbuf is trajring's experience store: a ring buffer of
// trajectory tensors filled from batched environments, Reverb-style tables
// of items over it, direct samplers, and MATLAB-style whole-buffer export.
//
// # Data model
//
// A Buffer has named fields (observation, action or policy-info tensors of
// a dtype and per-step shape) plus the TF-Agents trajectory columns
// step_type, next_step_type, reward and discount. Each field is one
// contiguous arena shaped [NumEnvs, Capacity, ...shape]: every env row is
// its own time axis, addressed by absolute step numbers (a row's cursor
// counts the steps ever written; slot = step % Capacity). A step holds the
// observation, action and policy info at t and the step type at t, with
// next_step_type, reward and discount from t+1, as a TF-Agents Trajectory.
//
// Writers own disjoint rows (NewWriter); Writer.Add writes one batched step
// of all or some of its rows in one backend call. A full row overwrites its
// oldest step. MATLAB users append experiences (Observation, Action,
// Reward, NextObservation, IsDone) instead, through an ExperienceWriter,
// which stores them as the same steps: AllExperiences returns them as
// appended.
//
// Tables (NewTable) hold items: Len steps of a row from Start, followed by
// Pad pad steps when sampled. Padding is never stored: the gather writes
// pad steps (zeros, step_type Last, next_step_type First, reward 0,
// discount 0) and a mask that is false on them (Batch.ItemMask tells an
// item's own pad steps from the padding a batch of items of different
// lengths adds). An item whose first step is
// overwritten leaves its tables at once. Samples come back as a Batch of
// tensors shaped [n, L, ...].
//
// Without tables, SampleSequences and SampleTransitions draw uniformly over
// the stored windows and transitions (never crossing a row's cursor), and
// AllExperiences exports every transition oldest first.
//
// # n-step returns and hindsight
//
// SampleNStep and AllNStepExperiences return n-step transitions: the
// discounted reward over up to NStepHorizon steps, stopping at the episode's
// last step or at the newest stored step, with the observation k steps later
// and the discount gamma^k (0 after a termination). A Hindsight relabels
// transitions with achieved goals (strategies final, future, episode,
// random), either at episode end (Generate, as MATLAB's hindsight memories
// do; relabeled experiences are kept beside the ring, not stored twice) or
// at sample time (as SB3 and TorchRL do), optionally into a prioritized
// table.
//
// # Backends and memory
//
// Bytes are moved by a Backend: the pure-Go cpu backend by default, the
// CUDA backend in builds tagged cuda, where batches and exports are
// *tensor.Dense values backed by device memory. Host() copies any result
// to host memory. Results are views of memory the buffer or batch owns;
// the SampleInto-style calls reuse a result's memory and allocate nothing
// in steady state.
//
// A Uniform or Prioritized table with TableConfig.DeviceSelection selects
// on its backend (ItemSelector, PrioritySelector): it mirrors its items,
// live list and sum tree in backend memory, patched before a sample when
// items changed, and a sample draws and gathers there (two launches on
// the gpu backend, nothing copied to the device and nothing waited for),
// with the same draws as the host. Keys, probabilities and weights then
// come back as tensors (Batch.KeyTensor; Batch.HostMeta copies them and
// fills Items), and
// Table.UpdatePrioritiesDevice takes a learner's priorities from device
// tensors. FIFO, LIFO, MaxTimesSampled and rate limits stay on the host.
//
// # Errors and concurrency
//
// Every error wraps one of the package's sentinel errors (errors.Is), and
// a call that fails changes nothing, with one exception: when the backend
// itself fails while a table sample gathers its items (ErrBackend, a lost
// device say), the items were already counted as sampled. Buffer and Table are safe for
// concurrent use; a Writer, Batch or Transitions value is used by one
// goroutine at a time.
package tensorbuf
