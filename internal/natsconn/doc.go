// Package natsconn ends a NATS connection the one way the project ends
// them: drain it, so that every reply and publish already handed to it goes
// out, and wait, bounded, until it is closed.
//
// It must never open a connection, never retry anything, and never hold
// anything of the pipeline (documents, streams, the task service): it knows a
// *nats.Conn and nothing else.
//
// It must never import anything but the standard library and NATS.
package natsconn
