// Package remote lets actors on other machines feed a learner's
// tensorbuf.Buffer through NATS JetStream, in the way Ape-X, R2D2, SEED RL
// and Reverb split actors from the learner, but on an existing
// distributed engine (JetStream: persistent, replicated with Raft,
// de-duplicating) instead of a home-made one.
//
//	actor machines                                 learner machine
//	+---------------------------+                  +-------------------------------+
//	| env -> policy -> driver   |   frames (K      | JetStream stream (file store) |
//	|   Publisher (Observer) ---+-- steps x rows)->|   durable pull consumer       |
//	|   picks up Params <-------+--- object store -+-- Ingester -> observers ->    |
//	+---------------------------+                  |   tensorbuf.Buffer (ring)     |
//	                                               +-------------------------------+
//
// An actor runs a driver with a Publisher as its observer. The Publisher
// batches K steps of one set of rows into a Frame (schema hash, actor id,
// rows, first step number per row, one contiguous block per field,
// optionally S2-compressed) and publishes it asynchronously to the stream
// with a message id (Nats-Msg-Id) that JetStream uses to drop the
// duplicates a retried publish creates. In-flight publishes are bounded;
// a failed publish is retried, in order, after a reconnect, so a server
// restart loses nothing.
//
// The learner runs an Ingester on a durable pull consumer. Each actor owns
// a contiguous range of buffer rows for as long as it is joined; the
// Ingester writes its frames through an observer made for those rows (a
// caller-supplied factory, so that items are created by the same
// observer.TrajectorySequence, AddTrajectory or AddEpisode as in one
// process), acknowledges a frame only after it is written, and drops every
// step it has already written, by (actor, row, step), so a redelivery never
// writes a step twice. A frame of a foreign schema or of a bad size is
// refused to a dead-letter subject and counted. An actor's frames are
// written in the order of their sequence numbers: a frame stored before
// its predecessor (a retried publish can arrive after its successor), and
// the frames of an actor waiting for free rows, are held in the Ingester,
// unacknowledged and bounded (ReorderBytes), until they can be written;
// beyond the bound a frame is handed back to the stream and written when
// it comes again, never given up. A predecessor still missing (never
// delivered) after GapTimeout (in stream time) is given up:
// the frame is written after a cut: the observers of the actor start
// afresh and the buffer marks the row's previous step as a cut, so no
// item, transition or n-step window crosses the gap. ActorIdle is measured
// in stream time too, so a backlog does not make live actors look idle;
// a pause in the stream (a server outage) counts at most a second.
//
// Params carries versioned policy parameters (an opaque blob) back to the
// actors through the JetStream object store.
package remote
