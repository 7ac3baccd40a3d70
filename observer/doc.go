// Package observer holds the observers a driver feeds with batched
// trajectories: observers that write every step into a tensorbuf.Buffer
// and create items in its tables, with the semantics of TF-Agents' Reverb
// observers, and metric observers with those of TF-Agents' tf_metrics.
//
//   - TrajectorySequence (ReverbTrajectorySequenceObserver): fixed-length
//     windows every Stride steps that run across episode boundaries;
//     padding happens in Reset.
//   - AddTrajectory (ReverbAddTrajectoryObserver): fixed-length windows
//     within an episode, for several tables with their own lengths and
//     strides; every boundary step resets the row, padding its cache or
//     dropping it.
//   - AddEpisode (ReverbAddEpisodeObserver): one item per whole episode,
//     boundary step included, up to a maximum length.
//   - EnvironmentSteps, NumberOfEpisodes, AverageReturn and
//     AverageEpisodeLength: counts and averages over the last K episodes,
//     cumulative and per run.
//
// Every item-writing observer keeps its state per env row, writes the
// steps through one tensorbuf.Writer that owns its rows (a second lone
// observer on the same rows is refused with tensorbuf.ErrRowOwned), and
// inserts items that reference only stored steps: a sequence length above the
// buffer's capacity is refused at construction. Pad steps are never
// stored; an item records how many follow its real steps, and sampling
// writes them (zeros, step type Last, next step type First, reward and
// discount 0, mask false).
//
// Several item-creating observers over the same rows (an episode table
// and a sequence table fed by one collection, as TF-Agents users pass
// several Reverb observers to one driver) are members of a Shared group:
// the group owns the writer and stores every step once, and each member
// creates exactly the items it would create alone. Give the driver the
// group, not the members.
//
// An observer given a DataSpec (see DataSpec) refuses, at construction,
// a buffer that does not store every field its trajectories carry;
// without one, trajectory fields the buffer does not store are ignored.
//
// The metric observers follow TF-Agents' tf_metrics: a step is a
// trajectory that is not a boundary (StepType not Last); an episode ends at
// the trajectory whose NextStepType is Last (TF-Agents' is_last), one step
// before its boundary trajectory, where drivers count it. Each metric
// keeps a cumulative result (since creation or Reset) and a per-run result
// (since the latest StartRun). Rows a driver marks inactive
// (driver.Trajectory.Active) are ignored by every observer here.
//
// All observers are safe for concurrent use: a learner may read results
// and statistics while a driver observes, and calls on one observer are
// serialised.
//
// Where TF-Agents is silent or inconsistent, this package decides:
// Reset(true) without padding writes nothing more (TF-Agents writes the
// last window a second time, or raises when the cache holds no full
// window); an AddEpisode episode that overflows at its boundary step does
// not also drop the next episode.
package observer
