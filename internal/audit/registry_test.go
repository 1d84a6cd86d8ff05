package audit_test

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/sendtwice/sendtwice/internal/audit"
)

// seenFailing holds the name of every check a test saw fail on purpose
// (failing, failingRun).
var seenFailing sync.Map

// TestMain runs the tests and then, when all of them ran and passed,
// requires that every check of the registry was seen failing by its name
// in one of them: a check that no test breaks is a check nobody knows
// works.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		for _, name := range audit.CheckNames() {
			if _, ok := seenFailing.Load(name); !ok {
				fmt.Fprintf(os.Stderr, "no test breaks the check %s on purpose and sees it fail by its name\n", name)
				code = 1
			}
		}
	}
	os.Exit(code)
}

func TestTheRegistryNamesEveryCheckOnceInKebabCase(t *testing.T) {
	names := audit.CheckNames()
	kebab := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	for i, name := range names {
		if !kebab.MatchString(name) {
			t.Errorf("check name %q is not kebab-case", name)
		}
		if slices.Index(names, name) != i {
			t.Errorf("check name %q is registered twice", name)
		}
	}
	if !slices.Contains(names, audit.RunCountersCheck) {
		t.Errorf("the registry holds no %s", audit.RunCountersCheck)
	}
}

func TestEveryReportNamesItsChecksFromTheRegistryAndNumbersThemInOrder(t *testing.T) {
	w := newWorld(t)
	listed := newWorld(t)
	listed.in.Listing = &audit.TaskListing{Name: "a listing", StoreID: auditedStore}
	reports := map[string][]audit.Check{
		"verify": audit.Verify(w.in).Checks,
		"listed": audit.Verify(listed.in).Checks,
		"run":    audit.VerifyRun(healthyRun()).Checks,
	}
	for what, checks := range reports {
		for i, c := range checks {
			if !slices.Contains(audit.CheckNames(), c.ID) || c.N != i+1 || c.Name == "" {
				t.Errorf("%s: check %d is %d %q (%s)", what, i+1, c.N, c.ID, c.Name)
			}
		}
	}
}
