package main

import (
	"github.com/sendtwice/sendtwice/internal/publish"
	"github.com/sendtwice/sendtwice/internal/redrive"
	"github.com/sendtwice/sendtwice/internal/serve"
	"github.com/sendtwice/sendtwice/internal/service"
	"github.com/sendtwice/sendtwice/internal/verify"
)

// The names the command's tests use for what moved into packages.
var (
	reloadTrusted    = serve.ReloadTrusted
	printReport      = verify.PrintReport
	printSendReceipt = publish.PrintSentReceipt
)

type (
	redriveReport   = redrive.Report
	statusReport    = service.StatusReport
	calendarsReport = service.CalendarsReport
	calendarEntry   = service.CalendarEntry
)
