package jaegertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// placeholderUI is a sentence of the page the query service serves in
// place of its UI when the binary holds no UI assets.
const placeholderUI = "This is not the Jaeger UI you are looking for"

// HasUI reports whether Jaeger serves its UI rather than the placeholder
// page of a binary built without the UI's assets (as one built from the Go
// module is, unless $JAEGERTEST_UI_ASSETS names them).
func (j *Jaeger) HasUI() (bool, error) {
	status, body, err := j.fetch("/")
	if err != nil || status != http.StatusOK {
		return false, fmt.Errorf("jaegertest: GET /: %d %v", status, err)
	}
	return !bytes.Contains(body, []byte(placeholderUI)), nil
}

// fetch GETs path (with its query) from the query service and returns the
// answer's status and body.
func (j *Jaeger) fetch(path string) (status int, body []byte, err error) {
	resp, err := j.client.Get(j.UI + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, b.Bytes(), nil
}

// answer is the envelope of every answer of Jaeger's HTTP API.
type answer[T any] struct {
	Data   T
	Errors []struct {
		Code int
		Msg  string
	}
}

// ErrNotFound is the error of Trace for a trace Jaeger does not hold.
var ErrNotFound = errors.New("jaegertest: trace not found")

// get fetches path (with its query) from the API and decodes its data.
func get[T any](j *Jaeger, path string) (T, error) {
	var a answer[T]
	status, body, err := j.fetch(path)
	if err != nil {
		return a.Data, fmt.Errorf("jaegertest: GET %s: %w", path, err)
	}
	if status == http.StatusNotFound {
		return a.Data, fmt.Errorf("%w: GET %s", ErrNotFound, path)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return a.Data, fmt.Errorf("jaegertest: GET %s: %d, decoding %.200q: %w", path, status, body, err)
	}
	if status != http.StatusOK || len(a.Errors) > 0 {
		return a.Data, fmt.Errorf("jaegertest: GET %s: %d %v", path, status, a.Errors)
	}
	return a.Data, nil
}

// Trace fetches the trace of id (32 hex digits); ErrNotFound when Jaeger
// holds none of it.
func (j *Jaeger) Trace(id string) (Trace, error) {
	traces, err := get[[]Trace](j, "/api/traces/"+url.PathEscape(id))
	if err != nil {
		return Trace{}, err
	}
	if len(traces) != 1 {
		return Trace{}, fmt.Errorf("jaegertest: GET /api/traces/%s: %d traces", id, len(traces))
	}
	return traces[0], nil
}

// Traces searches the traces with a span of service in the last hour
// (up to 1000), and with tags, when given, a span carrying every one of
// them.
func (j *Jaeger) Traces(service string, tags map[string]string) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {"1000"}, "lookback": {"1h"},
		"start": {fmt.Sprint(time.Now().Add(-time.Hour).UnixMicro())},
		"end":   {fmt.Sprint(time.Now().Add(time.Minute).UnixMicro())}}
	if len(tags) > 0 {
		b, err := json.Marshal(tags)
		if err != nil {
			return nil, fmt.Errorf("jaegertest: encoding the tags: %w", err)
		}
		q.Set("tags", string(b))
	}
	return get[[]Trace](j, "/api/traces?"+q.Encode())
}
