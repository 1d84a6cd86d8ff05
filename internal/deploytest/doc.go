// Package deploytest holds tests that start real servers with the
// configuration files under deploy/, adapted only in ports and paths, to show
// that what is shipped there works as documented. It has no code of its own
// and must never be imported.
package deploytest
