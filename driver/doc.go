// Package driver collects experience from batched environments with a
// policy, reproducing TF-Agents' DynamicStepDriver and DynamicEpisodeDriver,
// and hands every step to observers (package observer writes them into a
// tensorbuf buffer).
//
// # Data model
//
// An Environment has B rows. A TimeStep holds, for every row, the step type
// (First, Mid, Last), reward, discount and observations ([B, ...] tensors,
// one per observation field). Environments auto-reset: the step after a
// row's Last step returns First of its next episode, with reward 0 and
// discount 1, and ignores that row's action. Termination is Last with
// discount 0; truncation (a time limit) is Last with discount 1.
//
// A Policy maps a TimeStep and a state to a PolicyStep: actions, optional
// policy info, and the next state. A driver step is
//
//	ps := policy.Action(ts, state)
//	next := env.Step(ps.Action)
//	transition observers: ObserveTransition(ts, ps, next)
//	observers:            Observe(Trajectory{ts, ps, next})
//	ts, state = next, ps.State
//
// The Trajectory is TF-Agents': step type, observation, action and policy
// info from t; next step type, reward and discount from t+1. The trajectory
// whose StepType is Last (NextStepType First) is the boundary between two
// episodes; it is collected like any other step. With the Counting
// environment (package envs) and episodes of 3 steps, one row sees
//
//	count      0  1  2  3  4  5  6  7  8
//	StepType   F  M  M  L  F  M  M  L  F
//	boundary            ^           ^
//
// # Counting
//
// A StepDriver counts non-boundary trajectories summed over rows and stops
// as soon as the count is >= its number of steps: it may overshoot (by up
// to B-1), never undershoot. An EpisodeDriver counts boundary trajectories
// summed over rows, so an episode counts when its boundary step is taken,
// and stops as soon as the count is >= its number of episodes (several rows
// ending episodes in the same step overshoot). Both stop after at most
// WithMaxIterations batched steps (TF-Agents' maximum_iterations).
//
// Run(ctx, nil, nil) resets the environment and asks the policy for its
// initial state; Run(ctx, ts, state) with what the previous run returned
// continues exactly where it stopped: a sequence of runs sees the same
// trajectories as one longer run.
//
// # Short-episode bias and the per-row mode
//
// Counting episodes summed over rows favours short episodes: the rows whose
// episodes are short end more of them before the run stops, and the
// episodes still running in other rows (the long ones) are cut off and not
// counted. With two rows whose episodes last 1 and 9 steps, an
// EpisodeDriver of 4 episodes collects four 1-step episodes and none of 9
// steps. Running N > 1 batched environments for k episodes is therefore not
// the same as running one environment for k episodes (the note on bias in
// TF-Agents' DynamicEpisodeDriver.run documentation). Measured with 64 CartPoles under
// the random policy, over 20 seeds: 64 episodes summed over rows have a
// mean length of 17.0 steps, one episode per row (EpisodesPerRow) 22.7.
//
// The EpisodesPerRow option removes the bias: each row contributes exactly
// k complete episodes. A row is collected from a First step through its
// boundary trajectory; a row that is not at First when the run starts
// (a resumed run) waits until its current episode ends; a row that has its
// k episodes stays idle until all rows are done. The batched environment
// still steps idle and waiting rows (it cannot pause them), but those rows
// are not counted, and the observers are told to ignore them through
// Trajectory.Active (false on those rows; nil outside this mode). Because
// transition observers have no place for that mask, the mode refuses them.
//
// # Memory ownership
//
// Nothing is copied on the hot path, and a driver step with the built-in
// environments, the RandomPolicy and Parallel allocates nothing. The price
// is that memory is lent, not given:
//
//   - a TimeStep returned by an Environment stays valid until the second
//     following Step or Reset of that environment (environments use two
//     buffers in turn), so the final TimeStep a Run returns can be passed
//     to the next Run;
//   - a PolicyStep stays valid until the policy's next Action call;
//   - the Trajectory passed to Observe, and the arguments passed to
//     ObserveTransition, alias those buffers and are valid only during the
//     call.
//
// An observer must copy what it keeps (Trajectory.Clone, TimeStep.Clone, or
// its own copy into a buffer).
//
// # Errors
//
// A failure of the environment, the policy or an observer stops the run
// and is returned as a *StepError naming the stage, the iteration of the
// run and, when the cause carries a *RowError, the row; it unwraps to
// ErrEnv, ErrPolicy or ErrObserver and to the cause. Parallel reports each
// failed row as a *RowError. Bad configuration returns ErrConfig and bad
// tensors ErrSpec. Nothing in this package panics on bad input.
//
// # Concurrency
//
// Drivers, environments and policies are used by one goroutine at a time.
// Parallel steps its rows on a pool of worker goroutines, and several
// drivers over distinct environments may run at once (for example
// collectors writing disjoint rows of one buffer while a learner samples).
package driver
