// Package envs holds built-in environments for package driver:
//
//   - CartPole, a vectorised CartPole-v1 (gym's classic dynamics and
//     thresholds and its 500-step time limit as truncation), and
//     CartPoleEnv, one cart-pole as a driver.Env for driver.Parallel;
//   - Counting, a deterministic environment whose observation counts steps,
//     for tests and documentation;
//   - Noop and NoopEnv, which do nothing, for measuring the overhead of
//     drivers and of driver.Parallel;
//   - BitFlip, the bit-flipping goal environment of the HER paper, for
//     hindsight relabeling (tensorbuf.Hindsight).
//
// The batched environments follow driver.Environment's auto-reset
// convention and double-buffer their time steps: a returned TimeStep stays
// valid until the second following Step or Reset. Steps allocate nothing.
// None of the environments is safe for concurrent use unless its doc
// comment says so.
package envs
