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

// encodeTask writes req as an iCalendar object holding one VTODO.
func encodeTask(req taskservice.Request, now time.Time) ([]byte, error) {
	if !digestRE.MatchString(req.RequestDigest) {
		return nil, fmt.Errorf("caldav: request digest %q is not \"sha256:\" and 64 lower-case hexadecimal digits", req.RequestDigest)
	}
	if strings.TrimSpace(req.Task.Title) == "" {
		return nil, errors.New("caldav: the task's title is empty")
	}
	todo := ical.NewComponent(ical.CompToDo)
	todo.Props.SetText(ical.PropUID, TaskID(req.KeyScope(), req.IntentID))
	todo.Props.SetDateTime(ical.PropDateTimeStamp, now.UTC().Truncate(time.Second))
	todo.Props.SetText(ical.PropSummary, req.Task.Title)
	if req.Task.DueAt != nil {
		due, err := dueProp(*req.Task.DueAt)
		if err != nil {
			return nil, err
		}
		todo.Props.Set(due)
	}
	setX(todo, PropIntentID, req.IntentID)
	setX(todo, PropScope, req.KeyScope())
	setX(todo, PropRequestDigest, req.RequestDigest)
	setX(todo, PropRequestID, req.RequestID)
	setX(todo, PropCandidateID, req.CandidateID)
	setX(todo, PropSourceVersion, req.SourceVersion)
	setX(todo, PropApprovedBy, req.ApprovedBy)
	setX(todo, PropCallRef, req.CallRef)
	if req.Task.AssigneePersonRef != nil {
		// A person reference, not an address: never an ATTENDEE.
		setX(todo, PropAssigneeRef, *req.Task.AssigneePersonRef)
	}
	cal := ical.NewCalendar()
	cal.Props.SetText(ical.PropVersion, "2.0")
	cal.Props.SetText(ical.PropProductID, productID)
	cal.Children = append(cal.Children, todo)
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		return nil, fmt.Errorf("caldav: encoding the task: %w", err)
	}
	return buf.Bytes(), nil
}

// dueProp turns an RFC 3339 date-time into a UTC DATE-TIME, and an RFC
// 3339 full-date (2026-12-01) into a DATE.
func dueProp(s string) (*ical.Prop, error) {
	p := ical.NewProp(ical.PropDue)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		p.SetDateTime(t.UTC().Truncate(time.Second))
		return p, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		p.SetDate(t)
		return p, nil
	}
	return nil, fmt.Errorf("caldav: due_at %q is neither an RFC 3339 date-time nor a date", s)
}

func setX(c *ical.Component, name, value string) {
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
