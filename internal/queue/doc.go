// Package queue takes work off a channel in batches: the first item, then
// whatever else has queued up meanwhile, without waiting for more. The
// executor gathers its receipt batches this way, the bench its reference's
// batches, and the task service's store its commit groups.
//
// It must never import anything but the standard library, and never block
// once it has the first item: a batch is what is there, not what may come.
package queue
