package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// paramsObject is the object name of the policy parameters.
const paramsObject = "policy"

// Params carries versioned policy parameters from the learner to the
// actors through a JetStream object store bucket: an opaque blob (encode
// the network however the agent does, e.g. the DQN agent's encoding) and
// a version the learner increases. It is safe for concurrent use.
type Params struct {
	obs jetstream.ObjectStore
}

// OpenParams creates (learner, create true) or opens the bucket
// (default DefaultParamsBucket when bucket is "").
func OpenParams(ctx context.Context, js jetstream.JetStream, bucket string, replicas int, create bool) (*Params, error) {
	if bucket == "" {
		bucket = DefaultParamsBucket
	}
	var obs jetstream.ObjectStore
	var err error
	if create {
		obs, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Replicas: max(replicas, 1)})
	} else {
		obs, err = js.ObjectStore(ctx, bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("remote: params bucket %q: %w", bucket, err)
	}
	return &Params{obs: obs}, nil
}

// Publish stores the parameters as the given version, which must be
// above the newest stored one (an error wrapping ErrConfig otherwise, and
// nothing is stored). Versions are checked, not locked: one learner
// publishes.
func (p *Params) Publish(ctx context.Context, version uint64, blob []byte) error {
	have, err := p.Version(ctx)
	if err != nil {
		return err
	}
	if version <= have {
		return fmt.Errorf("%w: params v%d, the newest stored is v%d", ErrConfig, version, have)
	}
	_, err = p.obs.Put(ctx, jetstream.ObjectMeta{
		Name:     paramsObject,
		Metadata: map[string]string{"version": strconv.FormatUint(version, 10)},
	}, bytes.NewReader(blob))
	if err != nil {
		return fmt.Errorf("remote: publishing params v%d: %w", version, err)
	}
	return nil
}

// Put stores the parameters as the next version (the newest stored plus
// one, 1 for the first) and returns it.
func (p *Params) Put(ctx context.Context, blob []byte) (uint64, error) {
	have, err := p.Version(ctx)
	if err != nil {
		return 0, err
	}
	if err := p.Publish(ctx, have+1, blob); err != nil {
		return 0, err
	}
	return have + 1, nil
}

// Version returns the newest stored version (0 when nothing is stored).
func (p *Params) Version(ctx context.Context) (uint64, error) {
	info, err := p.obs.GetInfo(ctx, paramsObject)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("remote: params: %w", err)
	}
	v, err := strconv.ParseUint(info.Metadata["version"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: params version %q", ErrFrame, info.Metadata["version"])
	}
	return v, nil
}

// Latest returns the newest parameters if their version is above have
// (ok true), or ok false when there is nothing newer (or nothing yet).
func (p *Params) Latest(ctx context.Context, have uint64) (version uint64, blob []byte, ok bool, err error) {
	info, err := p.obs.GetInfo(ctx, paramsObject)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("remote: params: %w", err)
	}
	if v, _ := strconv.ParseUint(info.Metadata["version"], 10, 64); v <= have {
		return 0, nil, false, nil
	}
	res, err := p.obs.Get(ctx, paramsObject)
	if err != nil {
		return 0, nil, false, fmt.Errorf("remote: params: %w", err)
	}
	defer res.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(res); err != nil {
		return 0, nil, false, fmt.Errorf("remote: params: %w", err)
	}
	ri, err := res.Info()
	if err != nil {
		return 0, nil, false, fmt.Errorf("remote: params: %w", err)
	}
	v, err := strconv.ParseUint(ri.Metadata["version"], 10, 64)
	if err != nil {
		return 0, nil, false, fmt.Errorf("%w: params version %q", ErrFrame, ri.Metadata["version"])
	}
	if v <= have {
		return 0, nil, false, nil
	}
	return v, b.Bytes(), true, nil
}
