package main

import (
	"context"
	"strings"
	"testing"
)

func TestDemoExitsZeroAndPrintsTheTwoOneOneRow(t *testing.T) {
	t.Setenv(asMain, "1") // the demo's publisher processes are this binary
	table, errOut, err := runCLI(context.Background(), "demo")
	if err != nil {
		t.Fatalf("demo failed: %v\n%s\n%s", err, table, errOut)
	}
	expectLines(t, "table", table, "replayed fake-task-0001", "2, 1, 1", "idempotency_conflict", "3, 1, 1", "replayed fake-task-0001 (task deleted)", "4, 1, 0", "created, created", "2, 2, 2", "rejected at")
	if strings.Contains(table, "DIFFERS") {
		t.Errorf("a row differs:\n%s", table)
	}
}

// The demo's --verbose log says at INFO, with the reason, that it starts
// its stores empty and replaces them on purpose: nothing on its happy path
// reads as data loss, as the warnings for an operator's replaced store do.
func TestTheVerboseDemoLogsItsNewStoresCalmly(t *testing.T) {
	t.Setenv(asMain, "1") // the demo's publisher processes are this binary
	table, log, err := runCLI(context.Background(), "demo", "--verbose")
	if err != nil {
		t.Fatalf("demo failed: %v\n%s\n%s", err, table, log)
	}
	expectLines(t, "log", log, `level=INFO msg="new store, as meant: the demo starts every store`,
		`level=INFO msg="store adopted in place of the previous one, as meant: the demo starts every store`)
	for _, alarm := range []string{"STORE ADOPTED", "created again", "level=WARN msg=\"new store", "level=WARN msg=\"store adopted"} {
		if strings.Contains(log, alarm) {
			t.Errorf("the log says %q:\n%s", alarm, log)
		}
	}
}
