// Package tensorbuf is trajring's experience store: a ring buffer of
// trajectory tensors filled from batched environments, Reverb-style tables
// of items over it, direct samplers, and MATLAB-style whole-buffer export.
//
// # Data model
//
// A Buffer has named fields (observation, action or policy-info tensors of
// a dtype and per-step shape) plus the TF-Agents trajectory columns
// step_type, next_step_type, reward and discount. Storage is shaped
// [NumEnvs, Capacity, ...]: the small fields and the built-in columns
// share one packed record per step in one arena, and each large field
// (pixels) has an arena of its own. Every env row is its own time axis, addressed by absolute step numbers (a row's cursor
// counts the steps ever written; slot = step % Capacity). A step holds the
// observation, action and policy info at t and the step type at t, with
// next_step_type, reward and discount from t+1, as a TF-Agents Trajectory.
//
// Writers own disjoint rows (NewWriter); Writer.Add writes one batched step
// of all or some of its rows in one backend call. A full row overwrites its
// oldest step. MATLAB users append experiences (Observation, Action,
// Reward, NextObservation, IsDone) instead, through an ExperienceWriter,
// which stores them as the same steps: AllExperiences returns them as
// appended. Such a writer takes experiences in episode order, or in any
// order (offline or shuffled data) with ExperienceOptions.AnyOrder, at
// two steps of storage for each experience that does not continue its
// row's episode; Buffer.NewExperience builds one from plain slices.
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
// tensors. FIFO, LIFO, MinHeap, MaxHeap, WithoutReplacement,
// MaxTimesSampled and rate limits stay on the host.
//
// # File-backed buffers
//
// With Config.Dir the rings and the step metadata are shared mappings of
// preallocated files in that directory, so a buffer may be larger than
// memory and outlive its process: Sync makes its state durable (writing
// the dirty pages and the cursors, tables and random state), and Open
// reopens it, after a crash, exactly as of the last sync (an undo journal
// puts back the synced steps overwritten since). A directory is open in
// one Buffer at a time (ErrLocked); I/O failures wrap ErrStorage. See
// docs/files.md.
//
// # Seeded draws
//
// Every random choice of a table and of a direct sampler is a pure
// function of a seed, a stream, a call number and a draw number, so a
// sample can be reproduced outside trajring (the cuda build's kernels
// draw the same values). Draw k of call c on stream s under seed,
// Draw(seed, s, c, k), is the uint64 x = c0 | c1<<32 (k even) or
// c2 | c3<<32 (k odd), where (c0, c1, c2,
// c3) is Philox4x32-10 (Salmon et al., SC 2011; Random123, cuRAND and
// JAX use the same generator) of the counter (k/2, s, c mod 2^32, c>>32)
// under the key (seed mod 2^32, seed>>32). A draw x becomes an index in
// [0, n), Index(x, n), as the high 64 bits of the 128-bit product x*n
// (Lemire's multiply-shift, without rejection), and a number in [0, 1),
// Float64(x), as (x>>11) * 2^-53.
//
// A table draws on stream 0 under TableConfig.Seed. Its calls are
// numbered from 0 by the table: every SampleInto, SampleTransitionsInto
// or hindsight sample that selects counts one, whatever the selector (a
// call refused or left waiting counts none), and a checkpoint keeps the
// count. Draw k of a call selects the call's item k:
//
//   - Uniform: entry Index(x, N) of the table's live list of its N items.
//     The list holds the items in insertion order, except that removing
//     an item (Delete, MaxSize, MaxTimesSampled, its first step
//     overwritten) moves the list's last entry into its place.
//   - Prioritized: the item whose range of the running sum of the
//     weights priority^a, over the table's slots in order, holds
//     Float64(x) * total. A new item takes the most recently freed slot,
//     else the next new one, so with no item removed slots are in
//     insertion order. The table adds the weights in float64 by groups of
//     eight (an 8-ary sum tree); a linear float64 scan can differ only
//     where the point falls within rounding of a range's end.
//   - WithoutReplacement: entry Index(x, m) of the m entries left in the
//     epoch's list, which begins as the live items in insertion order;
//     the entry picked, or that of an item leaving the table, is replaced
//     by the list's last entry.
//   - FIFO, LIFO, MinHeap and MaxHeap draw nothing.
//
// With MaxTimesSampled an item can leave within a call, before the next
// draw, which then sees the list without it.
//
// Direct samplers (SampleSequences, SampleTransitions and SampleNStep,
// with their Into forms) draw under Config.Seed and share one count of
// calls per buffer (a call refused before it draws counts none). Call
// c's window k is window Index(Draw(seed, 1, c, k), total) of all
// windows of l steps (a transition's is 2), counted row by row from each
// row's oldest step: row r holds max(0, cursor - oldest - l + 1) of them.
// A sampler that avoids windows starting at an episode's boundary step or
// at a cut (transitions, n-step and episode-aware sequences) draws again
// on stream 1+t for try t = 1..63, and after 64 tries takes entry
// Index(Draw(seed, 2^31, c, k), v) of the v valid starts listed row by
// row, oldest first. Hindsight's goal choices use their own generator
// (HindsightConfig.Seed) and are not part of this contract.
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
