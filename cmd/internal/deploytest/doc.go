// Package deploytest holds tests that start real servers with the
// configuration files under deploy/, adapted only in ports and paths, to show
// that what is shipped there works as documented. It has no code of its own.
//
// It must never be imported by a production package, and never import
// anything but the standard library.
package deploytest
