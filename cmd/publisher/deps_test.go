package main

import (
	"os/exec"
	"strings"
	"testing"
)

// serverModules are what a sender's binary must not link: the store, the
// NATS server and the bench's PostgreSQL driver belong to the executor, the
// task service and the bench, not to the command a reviewer runs on a laptop.
var serverModules = []string{
	"github.com/cockroachdb/pebble",
	"github.com/nats-io/nats-server",
	"github.com/jackc/pgx",
}

// The publisher links none of the server's packages.
func TestThePublisherLinksNoServerPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for m, p := range serverPackages(string(out)) {
		t.Errorf("the publisher links %s (of %s): a sender's binary must not carry the server; move what imports it to another command", p, m)
	}
}

// serverPackages returns, for each of serverModules that deps (go list
// -deps output) reaches, the first of its packages listed.
func serverPackages(deps string) map[string]string {
	found := map[string]string{}
	for _, p := range strings.Fields(deps) {
		for _, m := range serverModules {
			if _, seen := found[m]; !seen && (p == m || strings.HasPrefix(p, m+"/")) {
				found[m] = p
			}
		}
	}
	return found
}
