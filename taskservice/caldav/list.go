package caldav

// This file lists the collection's tasks, for a probe, an audit and
// verify.

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/emersion/go-ical"
	"github.com/emersion/go-webdav"
	"github.com/emersion/go-webdav/caldav"

	"github.com/sendtwice/sendtwice/taskservice"
)

// TaskInfo is one VTODO of ours in the collection.
type TaskInfo struct {
	Scope         string // the X-SENDTWICE-SCOPE property; DefaultScope when absent
	IntentID      string // the X-SENDTWICE-INTENT-ID property
	TaskID        string // the UID, as Create answers it
	RequestDigest string // the X-SENDTWICE-REQUEST-DIGEST property
	Href          string // the resource's path on the server
	Title         string // the SUMMARY, unescaped
	// Unproven, with a mark key, says why its claim on its key is not
	// proven (no PropProof, or one that does not match); empty when it is,
	// and for every task without a mark key.
	Unproven string
}

// Listing is what the collection holds, read with one calendar-query
// REPORT (RFC 4791 §7.8) for VTODO components.
type Listing struct {
	// Tasks are the VTODOs that carry PropIntentID, ordered by intent id
	// and href.
	Tasks []TaskInfo
	// VTODOs counts every VTODO in the collection, ours or not.
	VTODOs int
}

// Tasks lists the VTODOs in the collection, for a probe or an audit: the
// tasks existing, as the server reports them.
func (a *Adapter) Tasks(ctx context.Context) (Listing, error) {
	rec := &statusRecorder{a: a}
	cc, err := caldav.NewClient(rec, a.normalized)
	if err != nil {
		return Listing{}, taskservice.Permanent(fmt.Errorf("caldav: %w", err))
	}
	objs, err := cc.QueryCalendar(ctx, a.collection.Path, &caldav.CalendarQuery{
		// Every property of the VTODOs: Xandikos reads <allcomp/> as the
		// components without their properties.
		CompRequest: caldav.CalendarCompRequest{Name: ical.CompCalendar, AllProps: true,
			Comps: []caldav.CalendarCompRequest{{Name: ical.CompToDo, AllProps: true, AllComps: true}}},
		CompFilter: caldav.CompFilter{Name: ical.CompCalendar, Comps: []caldav.CompFilter{{Name: ical.CompToDo}}},
	})
	if err != nil {
		err = fmt.Errorf("caldav: REPORT %s: %w", a.normalized, err)
		if rec.transportErr || rec.status == 0 || rec.status >= 500 || rec.status == http.StatusTooManyRequests || rec.status == http.StatusRequestTimeout {
			return Listing{}, taskservice.Transient(err)
		}
		return Listing{}, taskservice.Permanent(err)
	}
	var l Listing
	for _, o := range objs {
		if o.Data == nil {
			continue
		}
		for _, c := range o.Data.Children {
			if c.Name != ical.CompToDo {
				continue
			}
			l.VTODOs++
			intent := propText(c, PropIntentID)
			if intent == "" {
				continue
			}
			uid := propText(c, ical.PropUID)
			l.Tasks = append(l.Tasks, TaskInfo{Scope: todoScope(c), IntentID: intent, TaskID: uid, RequestDigest: propText(c, PropRequestDigest), Href: o.Path,
				Title: propText(c, ical.PropSummary), Unproven: a.unproven(c)})
		}
	}
	sort.Slice(l.Tasks, func(i, j int) bool {
		if l.Tasks[i].IntentID != l.Tasks[j].IntentID {
			return l.Tasks[i].IntentID < l.Tasks[j].IntentID
		}
		return l.Tasks[i].Href < l.Tasks[j].Href
	})
	return l, nil
}

// statusRecorder lets Tasks classify a failed REPORT: the library reports a
// status only in its error text.
type statusRecorder struct {
	a            *Adapter
	status       int
	transportErr bool
}

func (r *statusRecorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.a.do(req)
	if err != nil {
		r.transportErr = true
		return nil, err
	}
	r.status = resp.StatusCode
	return resp, nil
}

var _ webdav.HTTPClient = (*statusRecorder)(nil)

// ListTasks lists the collection's tasks as a taskservice.Listing: those
// that carry a key, and every VTODO counted (taskservice.Lister).
func (a *Adapter) ListTasks(ctx context.Context) (taskservice.Listing, error) {
	l, err := a.Tasks(ctx)
	if err != nil {
		return taskservice.Listing{}, fmt.Errorf("listing the tasks of the collection %s: %w", a.CollectionURL(), err)
	}
	out := taskservice.Listing{Name: "CalDAV collection " + a.CollectionURL(), StoreID: a.StoreID(), Items: l.VTODOs,
		NoCallLog: "the CalDAV server keeps no call log"}
	for _, t := range l.Tasks {
		out.Tasks = append(out.Tasks, taskservice.ListedTask{Scope: t.Scope, IntentID: t.IntentID, TaskID: t.TaskID,
			RequestDigest: t.RequestDigest, Where: t.Href, Title: t.Title, Unproven: t.Unproven})
	}
	return out, nil
}
