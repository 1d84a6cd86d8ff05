//go:build tools

// Package sendtwice pins modules that packages under construction will import.
package sendtwice

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
)
