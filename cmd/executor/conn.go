package main

import (
	"time"

	"github.com/nats-io/nats.go"
)

// drain drains nc and waits (bounded) until it is closed.
func drain(nc *nats.Conn) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return err
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		nc.Close()
	}
	return nil
}
