package testenv

import (
	"testing"

	"github.com/sendtwice/sendtwice/internal/scenario"
)

// Seed builds the seed scenario with unsigned approvals for the fake task
// service's default destination (scenario.Build), or fails the test.
func Seed(t testing.TB) *scenario.Seed {
	t.Helper()
	return SeedFor(t, scenario.For{})
}

// SeedFor builds the seed scenario with unsigned approvals, its requests
// for f's provider and destination (f.Build), or fails the test.
func SeedFor(t testing.TB, f scenario.For) *scenario.Seed {
	t.Helper()
	s, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
