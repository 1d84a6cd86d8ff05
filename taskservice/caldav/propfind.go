package caldav

// This file asks a CalDAV server for properties (PROPFIND) and reads its
// multi-status answers.
//
// It reads PROPFIND answers itself rather than through go-webdav's
// client: a check must tell a 401 from a 404 from a redirect (the
// library keeps a status only in its error text) and must ask for a
// collection's own URL, trailing slash included (the library drops it).

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sendtwice/sendtwice/taskservice"
)

// propfindMultiStatus is propfind for a caller that needs the server's
// multi-status: any other answer is an error, a refused login its own.
func (a *Adapter) propfindMultiStatus(ctx context.Context, u *url.URL, depth, body string) (davResponses, error) {
	rs, ans, err := a.propfind(ctx, u, depth, body)
	if err != nil {
		return nil, err
	}
	if ans != nil {
		if ans.code == http.StatusUnauthorized || ans.code == http.StatusForbidden {
			return nil, a.loginRefused("PROPFIND", u.String(), ans)
		}
		return nil, statusErr("PROPFIND", u, ans)
	}
	return rs, nil
}

// statusErr is the error of an answer other than the one expected.
func statusErr(method string, u *url.URL, ans *answer) error {
	err := fmt.Errorf("caldav: %s %s: the server answered %s%s", method, u, ans.status, ans.quoted())
	if transientStatus(ans.code) {
		return taskservice.Transient(err)
	}
	return taskservice.Permanent(err)
}

// The PROPFIND bodies.
const (
	propfindHead   = `<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:prop>`
	propfindTail   = `</d:prop></d:propfind>`
	checkProps     = propfindHead + `<d:resourcetype/><d:displayname/><d:current-user-principal/><c:calendar-home-set/><c:supported-calendar-component-set/>` + propfindTail
	principalProps = propfindHead + `<d:current-user-principal/>` + propfindTail
	homeProps      = propfindHead + `<c:calendar-home-set/>` + propfindTail
	calendarProps  = propfindHead + `<d:resourcetype/><d:displayname/><c:supported-calendar-component-set/>` + propfindTail
)

const (
	nsDAV    = "DAV:"
	nsCalDAV = "urn:ietf:params:xml:ns:caldav"
)

// answer is an HTTP answer other than 207 Multi-Status.
type answer struct {
	code     int
	status   string
	location string
	message  string // the start of the body, when it is text
}

// quoted is the server's message, for an error: ` ("...")` or nothing.
func (ans *answer) quoted() string {
	if ans.message == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", ans.message)
}

// davResponse is one response of a multistatus, with the properties found
// (200) merged.
type davResponse struct {
	path          string
	status        int // the response's own status, when it has one
	collection    bool
	calendar      bool
	principal     bool
	displayName   string
	userPrincipal string
	homes         []string
	comps         []string
	compsKnown    bool
}

func (r *davResponse) components() []string {
	if !r.compsKnown || len(r.comps) == 0 {
		return slices.Clone(allComponents)
	}
	return r.comps
}

type davResponses []*davResponse

// self is the response that describes u.
func (rs davResponses) self(u *url.URL) *davResponse {
	for _, r := range rs {
		if strings.TrimSuffix(r.path, "/") == strings.TrimSuffix(u.Path, "/") {
			return r
		}
	}
	if len(rs) == 1 {
		return rs[0]
	}
	return nil
}

type xmlMultistatus struct {
	Responses []struct {
		Href      string `xml:"DAV: href"`
		Status    string `xml:"DAV: status"`
		Propstats []struct {
			Status string `xml:"DAV: status"`
			Prop   struct {
				ResourceType *struct {
					Types []struct{ XMLName xml.Name } `xml:",any"`
				} `xml:"DAV: resourcetype"`
				DisplayName *string `xml:"DAV: displayname"`
				Principal   *struct {
					Href string `xml:"DAV: href"`
				} `xml:"DAV: current-user-principal"`
				HomeSet *struct {
					Hrefs []string `xml:"DAV: href"`
				} `xml:"urn:ietf:params:xml:ns:caldav calendar-home-set"`
				CompSet *struct {
					Comps []struct {
						Name string `xml:"name,attr"`
					} `xml:"urn:ietf:params:xml:ns:caldav comp"`
				} `xml:"urn:ietf:params:xml:ns:caldav supported-calendar-component-set"`
			} `xml:"DAV: prop"`
		} `xml:"DAV: propstat"`
	} `xml:"DAV: response"`
}

const maxMultistatusBytes = 4 << 20

// propfind sends a PROPFIND of u with depth and body. A 207 is decoded
// into its responses; any other answer is returned as it is, its body's
// start kept as the server's message. err is a classified failure (a
// transport error is transient).
func (a *Adapter) propfind(ctx context.Context, u *url.URL, depth, body string) (davResponses, *answer, error) {
	req, err := http.NewRequestWithContext(ctx, "PROPFIND", u.String(), strings.NewReader(body))
	if err != nil {
		return nil, nil, taskservice.Permanent(fmt.Errorf("caldav: PROPFIND: %w", err))
	}
	req.Header.Set("Content-Type", "application/xml; charset=utf-8")
	req.Header.Set("Depth", depth)
	resp, err := a.do(req)
	if err != nil {
		return nil, nil, taskservice.Transient(fmt.Errorf("caldav: PROPFIND %s: %w", u, err))
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusMultiStatus {
		return nil, &answer{code: resp.StatusCode, status: resp.Status, location: resp.Header.Get("Location"), message: serverMessage(resp)}, nil
	}
	var ms xmlMultistatus
	if err := xml.NewDecoder(io.LimitReader(resp.Body, maxMultistatusBytes)).Decode(&ms); err != nil {
		return nil, nil, taskservice.Transient(fmt.Errorf("caldav: PROPFIND %s: decoding the answer: %w", u, err))
	}
	var rs davResponses
	for _, x := range ms.Responses {
		r := &davResponse{path: hrefPath(u, x.Href), status: statusCode(x.Status)}
		for _, ps := range x.Propstats {
			if c := statusCode(ps.Status); c < 200 || c > 299 {
				continue
			}
			p := ps.Prop
			if p.ResourceType != nil {
				for _, t := range p.ResourceType.Types {
					switch t.XMLName {
					case xml.Name{Space: nsDAV, Local: "collection"}:
						r.collection = true
					case xml.Name{Space: nsDAV, Local: "principal"}:
						r.principal = true
					case xml.Name{Space: nsCalDAV, Local: "calendar"}:
						r.calendar = true
					}
				}
			}
			if p.DisplayName != nil {
				r.displayName = strings.TrimSpace(*p.DisplayName)
			}
			if p.Principal != nil && strings.TrimSpace(p.Principal.Href) != "" {
				r.userPrincipal = hrefPath(u, p.Principal.Href)
			}
			if p.HomeSet != nil {
				for _, h := range p.HomeSet.Hrefs {
					if strings.TrimSpace(h) != "" {
						r.homes = append(r.homes, a.at(hrefPath(u, h)).Path)
					}
				}
			}
			if p.CompSet != nil {
				r.compsKnown = true
				for _, c := range p.CompSet.Comps {
					r.comps = append(r.comps, strings.ToUpper(c.Name))
				}
			}
		}
		rs = append(rs, r)
	}
	return rs, nil, nil
}

// hrefPath is the decoded path of an href, resolved against the request's
// URL, ending in "/" as the collection paths here do.
func hrefPath(base *url.URL, href string) string {
	href = strings.TrimSpace(href)
	ref, err := url.Parse(href)
	if err != nil {
		// Xandikos writes the href of a missing resource with its scheme's
		// colon escaped ("http%3A//host/path").
		if un, uerr := url.PathUnescape(href); uerr == nil {
			ref, err = url.Parse(un)
		}
		if err != nil {
			return href
		}
	}
	if ref.Scheme == "" && strings.Contains(ref.Path, "://") {
		if r2, err := url.Parse(ref.Path); err == nil {
			ref = r2
		}
	}
	p := base.ResolveReference(ref).Path
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// statusCode reads the code of a status line ("HTTP/1.1 404 Not Found").
func statusCode(line string) int {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	c, _ := strconv.Atoi(f[1])
	return c
}

// serverMessage is the start of a text answer's body, on one line: what
// the server says, for an error message.
func serverMessage(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "text/plain") && !strings.HasPrefix(ct, "text/html") && ct != "" {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if !utf8.Valid(b) {
		return ""
	}
	if strings.HasPrefix(ct, "text/html") {
		return ""
	}
	s := strings.Join(strings.Fields(string(bytes.TrimSpace(b))), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
