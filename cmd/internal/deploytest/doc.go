// Package deploytest holds tests that start real servers with the
// configuration files under deploy/, adapted only in ports and paths, to show
// that what is shipped there works as documented, and the tests that keep the
// documentation true: the shell blocks of README.md and docs/ run against
// the built programs, and the command-line reference in docs/cli/ is what the
// programs print. It has no code of its own.
//
// It must never be imported by a production package, and never import
// anything but the standard library, internal/davtest, internal/redminetest
// and internal/jaegertest: the rigs that start the CalDAV and Redmine
// servers and the Jaeger a documentation block may need.
package deploytest
