package natsconn

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket opens the key-value bucket cfg names. With create it first
// creates it, or updates an existing one to cfg; when another client
// creates it at the same moment, the bucket that client made is opened.
// Without create a missing bucket is an error matching
// jetstream.ErrBucketNotFound.
func Bucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, create bool) (jetstream.KeyValue, error) {
	if !create {
		kv, err := js.KeyValue(ctx, cfg.Bucket)
		if err != nil {
			return nil, fmt.Errorf("natsconn: opening bucket %s: %w", cfg.Bucket, err)
		}
		return kv, nil
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Another client created it between our update and our create.
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("natsconn: creating bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}
