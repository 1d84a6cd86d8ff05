package main

import (
	"flag"
	"io"
	"testing"

	"github.com/sendtwice/sendtwice/cmd/internal/serve"
	"github.com/sendtwice/sendtwice/internal/executor"
)

// knobFlags defines the flags of serve's test knobs. TestMain gives them
// to serve (serveKnobFlags) in the processes the tests run as the program,
// and only there.
func knobFlags(fs *flag.FlagSet, k *serve.Knobs) {
	fs.Func("fault", "inject a fault: `POINT[@INTENT_ID]:ACTION[:PROBABILITY]`, POINT taken, after-call, after-receipt\n"+
		"or before-ack, ACTION kill or stall=DURATION; without a probability it fires once, or with @INTENT_ID\n"+
		"on every delivery of that intent (repeatable)", func(s string) error {
		spec, err := executor.ParseFault(s)
		k.Faults = append(k.Faults, spec)
		return err
	})
	fs.StringVar(&k.RecordCalls, "record-calls", "", "record every task service call for a linearizability check: append its invocation\n"+
		"(before the call) and its response (after) to `FILE` as JSON lines; one FILE per instance")
}

// The knobs that crash executors on purpose and record their calls are
// flags of the test binary only: the program's serve has none of them, nor
// the fault switch of the embedded service.
func TestTheProgramsServeHasNoTestKnobs(t *testing.T) {
	if serveKnobFlags != nil {
		t.Fatal("the knobs are set in the test process itself, where run stands for the program")
	}
	fs := newServeFlags(io.Discard).fs
	for _, name := range []string{"fault", "record-calls", "allow-faults"} {
		t.Run("--"+name+" is not a flag", func(t *testing.T) {
			if fs.Lookup(name) != nil {
				t.Errorf("serve has --%s", name)
			}
			err := run(t.Context(), []string{"serve", "--" + name, "x"}, io.Discard, io.Discard)
			if exitCode(err) != 2 {
				t.Errorf("serve --%s x: %v (exit %d), want an unknown flag (exit 2)", name, err, exitCode(err))
			}
		})
	}
}
