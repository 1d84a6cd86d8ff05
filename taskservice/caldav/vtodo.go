package caldav

// This file writes the VTODO of a request and reads its text properties:
// what a person sees of the task in a CalDAV client.

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-ical"

	"github.com/sendtwice/sendtwice/taskservice"
)

// encodeTask writes req as an iCalendar object holding one VTODO with uid:
// what a person reads in their client (SUMMARY, DESCRIPTION, DUE, STATUS)
// and the X-SENDTWICE-* marks the adapter reads back, PropProof among them
// when proofTag is not empty. Nothing is guessed: a request without a due
// date or an assignee gets no DUE and no assignee mark.
func encodeTask(req taskservice.Request, uid, proofTag string, now time.Time) ([]byte, error) {
	if !digestRE.MatchString(req.RequestDigest) {
		return nil, fmt.Errorf("caldav: request digest %q is not \"sha256:\" and 64 lower-case hexadecimal digits", req.RequestDigest)
	}
	if strings.TrimSpace(req.Task.Title) == "" {
		return nil, errors.New("caldav: the task's title is empty")
	}
	stamp := now.UTC().Truncate(time.Second)
	cal := ical.NewCalendar()
	cal.Props.SetText(ical.PropVersion, "2.0")
	cal.Props.SetText(ical.PropProductID, productID)

	todo := ical.NewComponent(ical.CompToDo)
	todo.Props.SetText(ical.PropUID, uid)
	todo.Props.SetDateTime(ical.PropDateTimeStamp, stamp)
	todo.Props.SetDateTime(ical.PropCreated, stamp)
	setText(todo, ical.PropSummary, req.Task.Title)
	setText(todo, ical.PropDescription, description(req))
	todo.Props.SetText(ical.PropStatus, "NEEDS-ACTION")
	if req.Task.DueAt != nil {
		due, zone, err := dueProp(*req.Task.DueAt)
		if err != nil {
			return nil, err
		}
		todo.Props.Set(due)
		if zone != nil {
			cal.Children = append(cal.Children, zone)
		}
	}
	setText(todo, PropIntentID, req.IntentID)
	setText(todo, PropScope, req.KeyScope())
	setText(todo, PropRequestDigest, req.RequestDigest)
	setText(todo, PropRequestID, req.RequestID)
	setText(todo, PropCandidateID, req.CandidateID)
	setText(todo, PropSourceVersion, req.SourceVersion)
	setText(todo, PropApprovedBy, req.ApprovedBy)
	setText(todo, PropCallRef, req.CallRef)
	setText(todo, PropProof, proofTag)
	if req.Task.AssigneePersonRef != nil {
		// A person reference, not an address: never an ATTENDEE.
		setText(todo, PropAssigneeRef, *req.Task.AssigneePersonRef)
	}
	cal.Children = append(cal.Children, todo)
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		return nil, fmt.Errorf("caldav: encoding the task: %w", err)
	}
	return buf.Bytes(), nil
}

// description is the task's DESCRIPTION, in plain lines: the candidate's
// summary, its evidence quotes (one a line, in order), then the transcript
// and the version of it the candidate came from. Parts the request does not
// carry are left out; a request with none of them gets no description ("").
func description(req taskservice.Request) string {
	var parts []string
	if s := strings.TrimSpace(req.Summary); s != "" {
		parts = append(parts, s)
	}
	var quotes []string
	for _, q := range req.Evidence {
		if q = strings.TrimSpace(q); q != "" {
			quotes = append(quotes, "- \u201c"+q+"\u201d")
		}
	}
	if len(quotes) > 0 {
		parts = append(parts, "Evidence:\n"+strings.Join(quotes, "\n"))
	}
	var source []string
	if req.TranscriptID != "" {
		source = append(source, "Transcript: "+req.TranscriptID)
	}
	if req.SourceVersion != "" {
		source = append(source, "Source version: "+req.SourceVersion)
	}
	if len(source) > 0 {
		parts = append(parts, strings.Join(source, "\n"))
	}
	return strings.Join(parts, "\n\n")
}

// dueProp turns the request's due_at into a DUE property:
//
//   - an RFC 3339 date-time in UTC ("Z", "+00:00" or "-00:00") into a UTC
//     DATE-TIME (DUE:20261224T013000Z);
//   - an RFC 3339 date-time with another offset into a local DATE-TIME in a
//     fixed-offset zone, which it returns too as the VTIMEZONE the DUE's
//     TZID names (DUE;TZID="UTC+08:00":20261224T093000): the zone the
//     request gave is kept, and clients read the same instant (todoman
//     shows it in its own zone, as it shows every time);
//   - an RFC 3339 full-date (2026-12-24) into a DATE (DUE;VALUE=DATE).
func dueProp(s string) (*ical.Prop, *ical.Component, error) {
	p := ical.NewProp(ical.PropDue)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		t = t.Truncate(time.Second)
		_, offset := t.Zone()
		if offset == 0 {
			p.SetDateTime(t.UTC())
			return p, nil, nil
		}
		tzid := zoneName(offset)
		p.SetValueType(ical.ValueDateTime)
		p.Params.Set(ical.PropTimezoneID, tzid)
		p.Value = t.Format("20060102T150405")
		return p, fixedZone(tzid, offset), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		p.SetDate(t)
		return p, nil, nil
	}
	return nil, nil, fmt.Errorf("caldav: due_at %q is neither an RFC 3339 date-time nor a date", s)
}

// zoneName names a fixed offset east of UTC in seconds: "UTC+08:00",
// "UTC-03:30".
func zoneName(offset int) string {
	return "UTC" + utcOffset(offset, ":")
}

// utcOffset writes offset (seconds east of UTC, whole minutes) as
// "+hh<sep>mm" or "-hh<sep>mm".
func utcOffset(offset int, sep string) string {
	sign := "+"
	if offset < 0 {
		sign, offset = "-", -offset
	}
	return fmt.Sprintf("%s%02d%s%02d", sign, offset/3600, sep, offset/60%60)
}

// fixedZone is the VTIMEZONE of a zone that is offset seconds east of UTC
// all year: one STANDARD observance since 1970 (RFC 5545 §3.6.5).
func fixedZone(tzid string, offset int) *ical.Component {
	std := ical.NewComponent(ical.CompTimezoneStandard)
	start := ical.NewProp(ical.PropDateTimeStart)
	start.SetValueType(ical.ValueDateTime)
	start.Value = "19700101T000000"
	std.Props.Set(start)
	for _, name := range []string{ical.PropTimezoneOffsetFrom, ical.PropTimezoneOffsetTo} {
		p := ical.NewProp(name)
		p.Value = utcOffset(offset, "")
		std.Props.Set(p)
	}
	std.Props.SetText(ical.PropTimezoneName, tzid)
	zone := ical.NewComponent(ical.CompTimezone)
	zone.Props.SetText(ical.PropTimezoneID, tzid)
	zone.Children = append(zone.Children, std)
	return zone
}

// setText sets a TEXT property, or an X- property (its value a TEXT too),
// escaped (line breaks of any kind as \n); an empty value sets nothing.
func setText(c *ical.Component, name, value string) {
	if value == "" {
		return
	}
	p := ical.NewProp(name)
	p.Value = escapeText(value)
	c.Props.Set(p)
}

// propText reads a TEXT property (RFC 5545 §3.3.11) as one value, without
// splitting at unescaped commas. A missing property reads as "".
func propText(c *ical.Component, name string) string {
	p := c.Props.Get(name)
	if p == nil {
		return ""
	}
	return unescapeText(p.Value)
}

var textEscaper = strings.NewReplacer(`\`, `\\`, `;`, `\;`, `,`, `\,`, "\r\n", `\n`, "\r", `\n`, "\n", `\n`)

func escapeText(s string) string { return textEscaper.Replace(s) }

func unescapeText(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n', 'N':
				b.WriteByte('\n')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
