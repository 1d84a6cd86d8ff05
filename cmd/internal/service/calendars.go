package service

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendtwice/sendtwice/internal/cli"
	"github.com/sendtwice/sendtwice/internal/redact"
	"github.com/sendtwice/sendtwice/taskservice/caldav"
)

// CalendarsHelp is calendars's usage.
const CalendarsHelp = `calendars --caldav-server URL [--caldav-user USER] [--caldav-password-file FILE]
                 [--caldav-ca-file FILE] [--all] [--json]

Lists the account's calendars that accept tasks (VTODO): display name, URL and components,
found the standard way from any URL on the CalDAV server (its /.well-known/caldav, the
account's principal and calendar home). Give one of the URLs to serve, probe and demo as
--caldav-url, or its display name as --caldav-calendar with this --caldav-server. With --all, the calendars that do not
accept tasks follow, marked. The password is read from --caldav-password-file, else from
$CALDAV_PASSWORD.

Exit status: 0 listed (even when no calendar accepts tasks); 1 the server could not be read
or refused the login; 2 usage.`

// CalendarsReport is calendars's --json output.
type CalendarsReport struct {
	// Server is the URL the calendars were discovered from.
	Server    string          `json:"server"`
	Calendars []CalendarEntry `json:"calendars"`
}

// CalendarEntry is one calendar in calendars's report.
type CalendarEntry struct {
	DisplayName  string   `json:"display_name"`
	URL          string   `json:"url"`
	Components   []string `json:"components"`
	AcceptsTasks bool     `json:"accepts_tasks"`
}

// CalendarsConfig is calendars's flags, as given.
type CalendarsConfig struct {
	fs *flag.FlagSet
	// server is the CalDAV server's flags, read as serve reads them.
	server      Config
	all, asJSON bool
	timeout     time.Duration
}

// CalendarsFlagsVar defines calendars's flags on fs.
func CalendarsFlagsVar(fs *flag.FlagSet) *CalendarsConfig {
	cf := &CalendarsConfig{fs: fs, server: Config{Kind: KindCalDAV}}
	fs.StringVar(&cf.server.CalDAVServer, "caldav-server", "", "the `URL` of the CalDAV server, or any URL on it (a principal, a calendar)")
	fs.StringVar(&cf.server.CalDAVUser, "caldav-user", "", "the `USER` to log in as (HTTP basic authentication)")
	fs.StringVar(&cf.server.CalDAVPasswordFile, "caldav-password-file", "", "a `FILE` holding the password (default: $"+CalDAVPasswordEnv+")")
	fs.StringVar(&cf.server.CalDAVCAFile, "caldav-ca-file", "", "a `FILE` of PEM certificates to trust for the server, besides the system's\n(for a server with a self-signed certificate)")
	fs.BoolVar(&cf.all, "all", false, "list also the calendars that do not accept tasks, marked")
	fs.BoolVar(&cf.asJSON, "json", false, "print JSON")
	fs.DurationVar(&cf.timeout, "timeout", caldav.DefaultTimeout, "how long one request to the server may take")
	return cf
}

// Calendars runs calendars with its parsed flags.
func Calendars(ctx context.Context, cf *CalendarsConfig, stdout io.Writer) error {
	url := cf.server.CalDAVServer
	if url == "" {
		cf.fs.Usage()
		return fmt.Errorf("%w: calendars needs --caldav-server", cli.ErrUsage)
	}
	if cf.timeout <= 0 {
		cf.fs.Usage()
		return fmt.Errorf("%w: --timeout must be positive", cli.ErrUsage)
	}
	// The password's file and environment and the CA file are read as
	// serve reads them, and the transport is serve's.
	cfg, err := cf.server.DiscoveryConfig(cf.timeout)
	if err != nil {
		return err
	}
	cals, err := caldav.Discover(ctx, cfg)
	if err != nil {
		return fmt.Errorf("listing the calendars of %s: %w", redact.URL(url), err)
	}
	report := CalendarsReport{Server: redact.URL(url), Calendars: []CalendarEntry{}}
	for _, c := range cals {
		if c.AcceptsTasks() || cf.all {
			report.Calendars = append(report.Calendars, CalendarEntry{DisplayName: c.DisplayName, URL: c.URL, Components: c.Components, AcceptsTasks: c.AcceptsTasks()})
		}
	}
	// Those that accept tasks first, each part in Discover's order.
	tasks := report.Calendars[:0:0]
	var others []CalendarEntry
	for _, c := range report.Calendars {
		if c.AcceptsTasks {
			tasks = append(tasks, c)
		} else {
			others = append(others, c)
		}
	}
	report.Calendars = append(tasks, others...)
	if cf.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	if len(tasks) == 0 {
		fmt.Fprintf(stdout, "no calendar of this account accepts tasks (%d calendars found; --all lists them)\n", len(cals))
		if len(others) == 0 {
			return nil
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DISPLAY NAME\tURL\tCOMPONENTS")
	for _, c := range report.Calendars {
		name := c.DisplayName
		if name == "" {
			name = "(no display name)"
		}
		comps := strings.Join(c.Components, ",")
		if !c.AcceptsTasks {
			comps += "  (does not accept tasks)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, c.URL, comps)
	}
	return tw.Flush()
}
