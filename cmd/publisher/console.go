package main

import (
	"context"
	"errors"
	"io"
)

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("console: not built yet")
}
