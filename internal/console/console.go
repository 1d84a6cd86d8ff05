package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendtwice/sendtwice/internal/sign"
	"github.com/sendtwice/sendtwice/internal/tracing"
	"github.com/sendtwice/sendtwice/send"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures a console.
type Config struct {
	// Dir is the candidates folder: NAME.candidate.json + NAME.request.json.
	Dir string
	// JetStream publishes approvals and reads receipts.
	JetStream jetstream.JetStream
	// By is the approver name the form starts with.
	By string
	// Wait bounds how long the console waits for one receipt; default 30s.
	Wait time.Duration
	// PublishTimeout bounds one publish; default 10s.
	PublishTimeout time.Duration
	// Server is shown in the page footer (a URL without secrets).
	Server string
	// AllowedHosts are the only hosts a request may name in its Host
	// header, as "host" (any port) or "host:port"; DefaultHosts gives those
	// of a listen address. Required: a web page cannot then reach the
	// console through DNS rebinding.
	AllowedHosts []string
	// Key, when set, signs the approvals the console makes, valid for
	// Lifetime (default approve.DefaultLifetime).
	Key      *sign.Key
	Lifetime time.Duration
	// KeyOwner is the reviewer name the trusted approvers give Key: when
	// set, the console makes approvals in that name only (executors refuse
	// an approved_by that is not the signing key's name).
	KeyOwner string
	// Trusted, when set, are the executors' trusted approvers: every send
	// then runs the signature, expiry and scope checks too, as executors do.
	Trusted *send.TrustedApprovers
	// TraceURL, when set, links each traced send to its trace: the
	// address with TraceIDPlaceholder replaced by the send's trace id (an
	// http or https URL template, such as Jaeger's
	// http://127.0.0.1:16686/trace/{trace_id}).
	TraceURL string
	// Clock stamps approvals and sends; default time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
}

// Console is the approval console's state and handlers.
type Console struct {
	cfg     Config
	log     *slog.Logger
	pages   map[string]*template.Template
	handler http.Handler

	// client publishes the approvals and reads their receipts.
	client *send.Client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// hosts is AllowedHosts parsed; token is the secret of the address
	// printed at start, session the value of the cookie it sets.
	hosts                      []hostRule
	token, session, cookieName string

	mu        sync.Mutex
	closed    bool
	approvals map[string]*kept
	sends     []*Send
}

// New returns a console over the folder cfg.Dir.
func New(cfg Config) (*Console, error) {
	if cfg.JetStream == nil {
		return nil, errors.New("console: a JetStream context is required")
	}
	if st, err := os.Stat(cfg.Dir); err != nil {
		return nil, fmt.Errorf("console: the candidates folder: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("console: the candidates folder %s is not a directory", cfg.Dir)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.KeyOwner != "" && cfg.Key == nil {
		return nil, errors.New("console: KeyOwner names the owner of Key, but there is no Key")
	}
	if cfg.KeyOwner != "" && cfg.By == "" {
		cfg.By = cfg.KeyOwner
	}
	if cfg.TraceURL != "" {
		if err := checkTraceURL(cfg.TraceURL); err != nil {
			return nil, fmt.Errorf("console: the trace URL template %q: %w", cfg.TraceURL, err)
		}
	}
	hosts, err := parseHostRules(cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, log: cfg.Logger, pages: pages, hosts: hosts, approvals: map[string]*kept{}, client: send.NewClient(cfg.JetStream)}
	if c.token, err = newSecret(); err != nil {
		return nil, err
	}
	if c.session, err = newSecret(); err != nil {
		return nil, err
	}
	// A name of its own for each run: cookies are shared by every port of a
	// host, and two consoles on one machine must not sign each other out.
	id, err := newSecret()
	if err != nil {
		return nil, err
	}
	c.cookieName = "sendtwice-console-" + id[:12]
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.handler = c.routes()
	return c, nil
}

// Handler returns the console's HTTP handler.
func (c *Console) Handler() http.Handler { return c.handler }

// Close stops the waits for receipts and ends open event streams.
func (c *Console) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", c.handleList)
	mux.HandleFunc("GET /c/{name}", c.handleReview)
	mux.HandleFunc("GET /c/{name}/candidate.json", c.handleDocument)
	mux.HandleFunc("GET /c/{name}/request.json", c.handleDocument)
	mux.HandleFunc("GET /c/{name}/approval.json", c.handleDocument)
	mux.HandleFunc("POST /c/{name}/send", c.handleSend)
	mux.HandleFunc("POST /c/{name}/discard", c.handleDiscard)
	mux.HandleFunc("GET /c/{name}/sends/{n}", c.handleSendPage)
	mux.HandleFunc("GET /c/{name}/sends/{n}/events", c.handleEvents)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "There is no page at this address.")
	})

	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusForbidden, "Refused",
			"This form was sent from another site. Approvals are only accepted from the console's own pages.")
	}))
	return securityHeaders(c.guard(csrf.Handler(mux)))
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// render executes a page into a buffer first, so that a template error is a
// clean 500 and not half a page.
func (c *Console) render(w http.ResponseWriter, status int, page string, data any) {
	var b bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&b, "layout", data); err != nil {
		c.log.Error("rendering a page", "page", page, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	c.render(w, status, "error", c.page(title, errorView{Status: status, Title: title, Message: message}))
}

// pageData is what the layout needs, with one page's view.
type pageData struct {
	Title  string
	Dir    string
	Server string
	// Refresh, when set, makes a browser without JavaScript load this
	// address (it waits for a pending receipt on the server).
	Refresh string
	View    any
}

func (c *Console) page(title string, view any) pageData {
	return pageData{Title: title, Dir: c.cfg.Dir, Server: c.cfg.Server, View: view}
}

type errorView struct {
	Status  int
	Title   string
	Message string
	// Bare leaves out the link to the candidates.
	Bare bool
}

func (c *Console) handleList(w http.ResponseWriter, r *http.Request) {
	items, err := listItems(c.cfg.Dir)
	if err != nil {
		c.errorPage(w, r, http.StatusInternalServerError, "Cannot read the candidates", err.Error())
		return
	}
	v := listView{}
	for _, it := range items {
		k, sends := c.itemState(it.Name)
		row := listRow{Item: it, URL: itemURL(it.Name)}
		if k != nil {
			row.ApprovedBy = k.Approval.ApprovedBy
		}
		if len(sends) > 0 {
			row.Last = c.resultView(sends[0], k)
		}
		if k == nil {
			v.Awaiting = append(v.Awaiting, row)
		} else {
			v.Approved = append(v.Approved, row)
		}
	}
	c.render(w, http.StatusOK, "list", c.page("Candidates", v))
}

func (c *Console) item(w http.ResponseWriter, r *http.Request) (*Item, bool) {
	it, err := findItem(c.cfg.Dir, r.PathValue("name"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "No such candidate",
			fmt.Sprintf("There is no candidate %q in %s.", r.PathValue("name"), c.cfg.Dir))
		return nil, false
	}
	return it, true
}

func (c *Console) handleReview(w http.ResponseWriter, r *http.Request) {
	it, ok := c.item(w, r)
	if !ok {
		return
	}
	c.renderReview(w, http.StatusOK, it, nil, "", c.cfg.By)
}

// renderReview renders an item's review page, with one send in focus (or
// none) and a form error (or none).
func (c *Console) renderReview(w http.ResponseWriter, status int, it *Item, focus *Send, formErr, by string) {
	k, sends := c.itemState(it.Name)
	v := reviewView{Item: it, URL: itemURL(it.Name), By: by, FormError: formErr, KeyOwner: c.cfg.KeyOwner}
	if c.cfg.Key != nil {
		v.KeyID = c.cfg.Key.ID
	}
	if k != nil {
		v.Approval = k.Approval
		v.Expired = k.expired(c.cfg.Clock())
		v.CandidateChanged = it.CandidateRaw != nil && it.CandidateDigest != k.Approval.Candidate.Digest
		v.RequestChanged = it.RequestRaw != nil && it.RequestDigest != k.Approval.Request.Digest
	}
	for _, s := range sends {
		v.Sends = append(v.Sends, c.resultView(s, k))
	}
	title := "Review " + it.Name
	var refresh string
	if focus != nil {
		// The focus is the table's own view of that send, so the panel and
		// the table never disagree (a receipt that arrives while the page
		// is made shows in both or in neither).
		var rv resultView
		found := false
		for i := range v.Sends {
			if sends[i] == focus {
				rv, found = v.Sends[i], true
			}
		}
		if !found {
			rv = c.resultView(focus, k)
		}
		v.Focus = &rv
		title = fmt.Sprintf("Send #%d of %s", focus.N, it.Name)
		if rv.Pending {
			refresh = rv.WaitURL
		}
	}
	p := c.page(title, v)
	p.Refresh = refresh
	c.render(w, status, "review", p)
}

func (c *Console) handleDocument(w http.ResponseWriter, r *http.Request) {
	it, ok := c.item(w, r)
	if !ok {
		return
	}
	var b []byte
	switch {
	case strings.HasSuffix(r.URL.Path, "/candidate.json"):
		b = it.CandidateRaw
	case strings.HasSuffix(r.URL.Path, "/request.json"):
		b = it.RequestRaw
	default:
		if k, _ := c.itemState(it.Name); k != nil {
			b = k.Raw
		}
	}
	if b == nil {
		c.errorPage(w, r, http.StatusNotFound, "No such document", "This document does not exist (yet).")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func (c *Console) handleSend(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		c.errorPage(w, r, http.StatusBadRequest, "Bad form", "The form could not be read.")
		return
	}
	name := r.PathValue("name")
	by := strings.TrimSpace(r.PostFormValue("by"))
	// The reviewer's click starts the trace; the publish continues it.
	ctx, span := tracing.Tracer().Start(r.Context(), "console approve", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	s, err := c.send(ctx, name, by, r.PostFormValue("candidate_digest"), r.PostFormValue("request_digest"))
	tracing.Fail(span, err)
	switch {
	case errors.Is(err, errNoItem):
		c.item(w, r) // renders the 404
		return
	case err != nil:
		it, ok := c.item(w, r)
		if !ok {
			return
		}
		status := http.StatusUnprocessableEntity
		if errors.Is(err, errNeedName) {
			status = http.StatusBadRequest
		}
		var changed errChangedWhileReviewing
		if errors.As(err, &changed) {
			status = http.StatusConflict
		}
		c.renderReview(w, status, it, nil, err.Error(), by)
		return
	}
	http.Redirect(w, r, sendURL(name, s.N)+"#result", http.StatusSeeOther)
}

func (c *Console) handleDiscard(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.item(w, r); !ok {
		return
	}
	c.discard(r.PathValue("name"))
	http.Redirect(w, r, itemURL(r.PathValue("name")), http.StatusSeeOther)
}

func (c *Console) sendFor(w http.ResponseWriter, r *http.Request) (*Item, *Send, bool) {
	it, ok := c.item(w, r)
	if !ok {
		return nil, nil, false
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	var s *Send
	if err == nil {
		s = c.sendByN(it.Name, n)
	}
	if s == nil {
		c.errorPage(w, r, http.StatusNotFound, "No such send",
			fmt.Sprintf("The console has no send %q of %s. Sends are kept only while the console runs.", r.PathValue("n"), it.Name))
		return nil, nil, false
	}
	return it, s, true
}

// handleSendPage shows the review page with one send in focus. With ?wait,
// it first waits (up to the console's wait) for a pending receipt: the
// variant for browsers without JavaScript.
func (c *Console) handleSendPage(w http.ResponseWriter, r *http.Request) {
	it, s, ok := c.sendFor(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Has("wait") {
		select {
		case <-c.watch(s):
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
		}
	}
	c.renderReview(w, http.StatusOK, it, s, "", c.cfg.By)
}

// handleEvents streams a send's outcome as server-sent events: "row" with
// the send's row of the table, then "result" with the result panel, both
// as HTML, once the receipt is there (or the wait for it ended).
func (c *Console) handleEvents(w http.ResponseWriter, r *http.Request) {
	it, s, ok := c.sendFor(w, r)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "retry: 2000\n\n")
	_ = rc.Flush()
	done := c.watch(s)
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			k, _ := c.itemState(it.Name)
			rv := c.resultView(s, k)
			for _, ev := range []struct{ name, tmpl string }{{"row", "sendrow"}, {"result", "result"}} {
				var b bytes.Buffer
				if err := c.pages["review"].ExecuteTemplate(&b, ev.tmpl, rv); err != nil {
					c.log.Error("rendering an event", "event", ev.name, "err", err)
					return
				}
				writeEvent(w, ev.name, b.String())
			}
			_ = rc.Flush()
			return
		case <-tick.C:
			_, _ = io.WriteString(w, ": still waiting\n\n")
			_ = rc.Flush()
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// writeEvent writes one server-sent event; each line of data is one data
// field.
func writeEvent(w io.Writer, name, data string) {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(strings.ReplaceAll(data, "\r", ""), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	_, _ = io.WriteString(w, b.String())
}
