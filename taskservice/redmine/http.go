package redmine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sendtwice/sendtwice/internal/redact"
	"github.com/sendtwice/sendtwice/taskservice"
)

// maxBodyBytes bounds an answer read from Redmine.
const maxBodyBytes = 8 << 20

// endpoint is the URL of p (relative to the base URL) with query q.
func (a *Adapter) endpoint(p string, q url.Values) *url.URL {
	u := *a.base
	u.Path += strings.TrimPrefix(p, "/")
	if q != nil {
		u.RawQuery = q.Encode()
	}
	return &u
}

// do sends req with the API key. Requests go only to the configured
// server: every URL is built from the base URL and redirects are not
// followed.
func (a *Adapter) do(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != a.base.Scheme || !strings.EqualFold(req.URL.Host, a.base.Host) {
		return nil, fmt.Errorf("redmine: refusing a request to %s://%s, which is not the configured server", req.URL.Scheme, req.URL.Host)
	}
	req.Header.Set("X-Redmine-API-Key", a.apiKey)
	req.Header.Set("Accept", "application/json")
	return a.client.Do(req)
}

// exchange sends one request (body, when not nil, as JSON) and returns the
// status and the body read. err is a classified transport failure:
// transient.
func (a *Adapter) exchange(ctx context.Context, method string, target *url.URL, body any) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, taskservice.Permanent(fmt.Errorf("redmine: %s %s: encoding the body: %w", method, target, err))
		}
		rd = bytes.NewReader(b)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		return nil, nil, taskservice.Permanent(fmt.Errorf("redmine: %s: %w", method, err))
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.do(hreq)
	if err != nil {
		return nil, nil, taskservice.Transient(a.scrub(fmt.Errorf("redmine: %s %s: %w", method, target, err)))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return nil, nil, taskservice.Transient(a.scrub(fmt.Errorf("redmine: %s %s: reading the answer: %w", method, target, err)))
	}
	return resp, b, nil
}

// getJSON reads target into v; any answer but 200 is a classified error.
func (a *Adapter) getJSON(ctx context.Context, target *url.URL, what string, v any) error {
	resp, body, err := a.exchange(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return a.statusError(http.MethodGet, target, what, resp, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		// A body cut short reads as bad JSON too: reading again is harmless.
		return taskservice.Transient(fmt.Errorf("redmine: GET %s (%s): the answer is not the JSON expected: %w", target, what, err))
	}
	return nil
}

// statusError classifies an unexpected answer. 5xx, 408 and 429 are
// transient; everything else (401, 403, 404, 422, a redirect) is
// permanent. The message names the method, the URL, what was being done,
// the status and, for a JSON answer with "errors", Redmine's own message;
// never the API key, nor a query or user information of a redirect's
// target.
func (a *Adapter) statusError(method string, target *url.URL, what string, resp *http.Response, body []byte) error {
	msg := fmt.Sprintf("redmine: %s %s (%s): the server answered %s", method, target, what, resp.Status)
	if m := serverMessage(body); m != "" {
		msg += ": " + m
	}
	switch code := resp.StatusCode; {
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return taskservice.Transient(a.scrub(errors.New(msg)))
	case code == http.StatusUnauthorized:
		msg += ": the API key was refused (check the key, and that the REST web service is enabled in Administration » Settings » API)"
	case code == http.StatusForbidden:
		msg += ": the API key's user is not allowed to do this"
	case code == http.StatusNotFound:
		msg += ": not found, or not visible to the API key's user"
	case code >= 300 && code < 400:
		msg += fmt.Sprintf(" with a redirect to %q, which is not followed: configure Redmine's own URL", redact.URL(resp.Header.Get("Location")))
	}
	return taskservice.Permanent(a.scrub(errors.New(msg)))
}

// serverMessage is Redmine's message in an error answer: the "errors" of
// a JSON body ({"errors": ["Subject cannot be blank"]}), joined; "" for
// another body.
func serverMessage(body []byte) string {
	var e struct {
		Errors []string `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Errors) == 0 {
		return ""
	}
	m := strings.Join(e.Errors, "; ")
	if len(m) > 1000 {
		m = m[:1000] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' {
			return ' '
		}
		return r
	}, m)
}

// scrub removes the API key from err's text, in case a server or a
// library ever echoes it.
func (a *Adapter) scrub(err error) error {
	if a.apiKey == "" || !strings.Contains(err.Error(), a.apiKey) {
		return err
	}
	return &scrubbed{err: err, text: strings.ReplaceAll(err.Error(), a.apiKey, "[API key]")}
}

type scrubbed struct {
	err  error
	text string
}

func (s *scrubbed) Error() string { return s.text }
func (s *scrubbed) Unwrap() error { return s.err }
