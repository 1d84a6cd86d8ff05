//go:build tools

// Package sendtwice pins the core modules until every package imports them.
package sendtwice

import (
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/cockroachdb/pebble/v2/vfs"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/nats-io/nats.go/micro"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
)
