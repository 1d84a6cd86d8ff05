package main

import "github.com/sendtwice/sendtwice/internal/publish"

// The names the command's tests use for what moved into packages.
const (
	trustedEnv = publish.TrustedEnv
	notChecked = publish.NotChecked
)

var printReceipt = publish.PrintReceipt
