package act

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestCheckInvocation(t *testing.T) {
	ok := Invocation{Capability: "gpio.set", Target: "gpio.led", IdempotencyKey: "k-1", Params: map[string]string{"state": "on"}, Note: "lights on\tfor the guests\n"}
	many := map[string]string{}
	for i := range MaxParams + 1 {
		many[fmt.Sprintf("p%d", i)] = "x"
	}
	big := map[string]string{}
	for i := range 4 {
		big[fmt.Sprintf("p%d", i)] = strings.Repeat("x", 500)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Invocation)
		want string // "" accepted
	}{
		{"a request in bounds", func(*Invocation) {}, ""},
		{"a notification's longest message", func(i *Invocation) {
			i.Params = map[string]string{"message": strings.Repeat("é", 512), "attention": "high"}
		}, ""},
		{"the longest names", func(i *Invocation) {
			i.Target, i.IdempotencyKey = strings.Repeat("t", MaxNameBytes), strings.Repeat("k", MaxNameBytes)
		}, ""},
		{"a capability of 300 bytes", func(i *Invocation) { i.Capability = strings.Repeat("a", 300) }, "capability: 300 bytes, more than 128"},
		{"a capability no capability could have", func(i *Invocation) { i.Capability = "Door Open" }, "capability: \"Door Open\": names are words"},
		{"a target too long", func(i *Invocation) { i.Target = strings.Repeat("t", 129) }, "target: 129 bytes, more than 128"},
		{"a target with a newline", func(i *Invocation) { i.Target = "gpio.led\n" }, "target: character U+000A at byte 8"},
		{"an idempotency key too long", func(i *Invocation) { i.IdempotencyKey = strings.Repeat("k", 40000) }, "idempotency_key: 40000 bytes, more than 128"},
		{"an idempotency key with a space", func(i *Invocation) { i.IdempotencyKey = "k 1" }, "idempotency_key: character U+0020"},
		{"a work item too long", func(i *Invocation) { i.WorkItemID = strings.Repeat("w", 200) }, "workitem_id: 200 bytes, more than 128"},
		{"a note of 30 KiB", func(i *Invocation) { i.Note = strings.Repeat("n", 30<<10) }, "note: 30720 bytes, more than 1024"},
		{"a note with a terminal escape", func(i *Invocation) { i.Note = "look \x1b[2J here" }, "note: control character U+001B at byte 5"},
		{"a note with a carriage return", func(i *Invocation) { i.Note = "ok\rforged" }, "note: control character U+000D"},
		{"a note not UTF-8", func(i *Invocation) { i.Note = "\xff\xfe" }, "note: not UTF-8"},
		{"a precondition too long", func(i *Invocation) { i.Precondition = strings.Repeat("p", 300) }, "precondition: 300 bytes, more than 256"},
		{"too many params", func(i *Invocation) { i.Params = many }, "params: 17 of them, more than 16"},
		{"a param name too long", func(i *Invocation) { i.Params = map[string]string{strings.Repeat("k", 65): "x"} }, "params: a name: 65 bytes, more than 64"},
		{"a param without a name", func(i *Invocation) { i.Params = map[string]string{"": "x"} }, "params: a param without a name"},
		{"a param value too long", func(i *Invocation) { i.Params = map[string]string{"message": strings.Repeat("m", 1025)} }, "params.message: 1025 bytes, more than 1024"},
		{"a param value with a NUL", func(i *Invocation) { i.Params = map[string]string{"state": "on\x00"} }, "params.state: control character U+0000"},
		{"params too large together", func(i *Invocation) { i.Params = big }, "params: 2008 bytes of names and values, more than 1536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := ok
			inv.Params = maps.Clone(ok.Params)
			tc.mod(&inv)
			err := CheckInvocation(&inv)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// summaries reads every action.refusals event of the ledger.
func summaries(t *testing.T, store *ledger.Store) []RefusalSummary {
	t.Helper()
	evs, err := store.Events(ledger.Filter{Types: []string{EventRefusals}, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var out []RefusalSummary
	for _, e := range evs {
		var s RefusalSummary
		if err := ledger.UnmarshalPayload(e.Payload, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// total adds up the summaries of subject.
func total(ss []RefusalSummary, subject string) RefusalSummary {
	sum := RefusalSummary{Subject: subject, ByReason: map[Reason]uint64{}, ByCapability: map[string]uint64{}}
	for _, s := range ss {
		if s.Subject != subject {
			continue
		}
		sum.Count += s.Count
		for r, n := range s.ByReason {
			sum.ByReason[r] += n
		}
		for c, n := range s.ByCapability {
			sum.ByCapability[c] += n
		}
	}
	return sum
}

func ledgerBytes(t *testing.T, store *ledger.Store) int64 {
	t.Helper()
	st, err := store.Stats()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(st.Path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// countActions counts the action records (action.proposed, ...; not the
// summaries) in the ledger.
func countActions(t *testing.T, store *ledger.Store) int {
	t.Helper()
	evs, err := store.Events(ledger.Filter{Types: []string{"action."}, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type != EventRefusals {
			n++
		}
	}
	return n
}

// runRunner runs the runner's Run until the returned stop is called,
// which waits for it to end.
func runRunner(r *Runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// Finding 2, the review's attack: 300 requests with a 30 KB note grew the
// ledger by 33 MB, every one recorded twice with its note. Now each is
// refused with the bound's message, none is recorded, and one summary
// accounts for all of them.
func TestOversizedRequestsAreNotRecorded(t *testing.T) {
	b := newBench(t)
	stop := runRunner(b.r)
	defer stop()
	before, actions := ledgerBytes(t, b.store), countActions(t, b.store)
	note := strings.Repeat("n", 30<<10)
	for i := range 300 {
		res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led",
			Params: map[string]string{"state": "on"}, Note: note, IdempotencyKey: fmt.Sprint("k-", i)})
		if res.Status != Refused || res.Reason != ReasonInvalidRequest || res.Detail != "note: 30720 bytes, more than 1024" || res.ActionID != "" {
			t.Fatalf("request %d: got %s %s %q action %q, want refused invalid_request %q and no action", i, res.Status, res.Reason, res.Detail, res.ActionID, "note: 30720 bytes, more than 1024")
		}
	}
	stop()
	if n := countActions(t, b.store) - actions; n != 0 {
		t.Errorf("got %d action records, want none", n)
	}
	if grew := ledgerBytes(t, b.store) - before; grew >= 1<<20 {
		t.Errorf("the ledger grew by %d bytes, want under 1 MiB", grew)
	}
	sum := total(summaries(t, b.store), "agent:pi")
	if sum.Count != 300 || sum.ByReason[ReasonInvalidRequest] != 300 || sum.ByCapability["gpio.set"] != 300 {
		t.Errorf("got a summary of %d refusals (%v, %v), want 300 invalid_request of gpio.set", sum.Count, sum.ByReason, sum.ByCapability)
	}
	// The body still acts for the same principal.
	if res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}); res.Status != Succeeded {
		t.Errorf("a request in bounds afterwards: got %s %s %s, want succeeded", res.Status, res.Reason, res.Detail)
	}
}

// Finding 2 through the policy: 300 requests with 1 KiB notes that the
// policy refuses, from a low-trust principal, at once. The admission
// limit takes a token from every one of them before anything is recorded:
// its burst is recorded one by one, each with its own reason, and the
// rest is refused rate_limited and summarised. The ledger grows by a
// burst's records, not by 300 requests'.
func TestAdmissionLimitsRefusedRequests(t *testing.T) {
	b := newBench(t)
	clock := &fakeClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	b.r.env.Now = clock.Now
	limit := RateLimit{Burst: 30, PerSecond: 2}
	adm, err := NewAdmission(limit, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	b.r.env.Admission = adm
	stranger := Principal{Kind: AgentSession, Subject: "agent:stranger", Session: "s9", Trust: ledger.Low}
	stop := runRunner(b.r)
	defer stop()
	before, actions := ledgerBytes(t, b.store), countActions(t, b.store)
	note := strings.Repeat("n", 1024)
	byReason := map[Reason]int{}
	for i := range 300 {
		res := b.r.Submit(context.Background(), Invocation{Principal: stranger, Capability: "gpio.set", Target: "gpio.led",
			Params: map[string]string{"state": "on"}, Note: note, IdempotencyKey: fmt.Sprint("k-", i)})
		if res.Status != Refused {
			t.Fatalf("request %d: got %s, want refused", i, res.Status)
		}
		byReason[res.Reason]++
		if res.Reason == ReasonRateLimited && (res.ActionID != "" || !strings.Contains(res.Detail, "admission limit")) {
			t.Errorf("request %d: got action %q detail %q, want no action and the admission limit named", i, res.ActionID, res.Detail)
		}
	}
	if byReason[ReasonRiskExceedsTrust] != limit.Burst || byReason[ReasonRateLimited] != 300-limit.Burst {
		t.Errorf("got %v, want %d risk_exceeds_trust (the burst, recorded) and %d rate_limited", byReason, limit.Burst, 300-limit.Burst)
	}
	stop()
	if n := countActions(t, b.store) - actions; n != 2*limit.Burst {
		t.Errorf("got %d action records, want %d (a proposal and a refusal for each of the burst)", n, 2*limit.Burst)
	}
	if grew := ledgerBytes(t, b.store) - before; grew >= 1<<20 {
		t.Errorf("the ledger grew by %d bytes, want under 1 MiB", grew)
	}
	sum := total(summaries(t, b.store), "agent:stranger")
	if want := uint64(300 - limit.Burst); sum.Count != want || sum.ByReason[ReasonRateLimited] != want || sum.ByCapability["gpio.set"] != want {
		t.Errorf("got a summary of %d (%v, %v), want %d rate_limited of gpio.set", sum.Count, sum.ByReason, sum.ByCapability, want)
	}
	// Another principal has its own allowance; the stranger's refills.
	if res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}); res.Status != Succeeded {
		t.Errorf("another principal: got %s %s %s, want succeeded", res.Status, res.Reason, res.Detail)
	}
	clock.Add(time.Second)
	if res := b.r.Submit(context.Background(), Invocation{Principal: stranger, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}); res.Reason != ReasonRiskExceedsTrust {
		t.Errorf("a second later: got %s %s, want the policy's risk_exceeds_trust", res.Status, res.Reason)
	}
	// A stop is never held back by the admission limit.
	for range 100 {
		adm.Take(stranger.Subject, admissionKey)
	}
	if res := b.r.Submit(context.Background(), Invocation{Principal: stranger, Capability: CapabilityEStopTrip, Target: "estop.main"}); res.Reason == ReasonRateLimited {
		t.Errorf("estop.trip over the admission limit: got %s %s, want it past the limit", res.Status, res.Reason)
	}
}

// Finding 5: a malformed request (a 300-character capability) made the
// ledger's append fail, which marked the runner's ledger down, so the
// next request from anyone was refused ledger_unavailable. Now the bound
// refuses it before any append; and a record the ledger refuses for what
// it holds (here a dedupe key too long, from a transport's overlong
// subject) is the request's fault, not the ledger's.
func TestMalformedRequestDoesNotMarkTheLedgerDown(t *testing.T) {
	admin := Principal{Kind: LocalAdmin, Subject: "admin:uid=0", Session: "admin", Trust: ledger.High}
	for _, tc := range []struct {
		name   string
		inv    Invocation
		detail string
	}{
		{"a 300-character capability", Invocation{Principal: Principal{Kind: AgentSession, Subject: "agent:pi", Session: "s1", Trust: ledger.High},
			Capability: strings.Repeat("a", 300), Target: "gpio.led"}, "capability: 300 bytes, more than 128"},
		{"a record the ledger refuses", Invocation{Principal: Principal{Kind: AgentSession, Subject: "agent:" + strings.Repeat("p", 300), Session: "s1", Trust: ledger.High},
			Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}, "the ledger refused the record of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			res := b.r.Submit(context.Background(), tc.inv)
			if res.Status != Refused || res.Reason != ReasonInvalidRequest || !strings.Contains(res.Detail, tc.detail) {
				t.Errorf("got %s %s %q, want refused invalid_request %q", res.Status, res.Reason, res.Detail, tc.detail)
			}
			next := b.r.Submit(context.Background(), Invocation{Principal: admin, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
			if next.Status != Succeeded {
				t.Errorf("another principal's request next: got %s %s %q, want succeeded", next.Status, next.Reason, next.Detail)
			}
			if err := b.r.FlushRefusals(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			if sum := total(summaries(t, b.store), tc.inv.Principal.Subject); sum.Count != 1 || sum.ByReason[ReasonInvalidRequest] != 1 {
				t.Errorf("got a summary of %d (%v), want the one invalid request", sum.Count, sum.ByReason)
			}
		})
	}
	// A write that fails still marks the ledger down.
	b := newBench(t)
	b.r.journal = failingJournal{}
	b.r.Submit(context.Background(), Invocation{Principal: admin, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	b.r.journal = b.store
	if res := b.r.Submit(context.Background(), Invocation{Principal: admin, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}); res.Reason != ReasonLedgerUnavailable {
		t.Errorf("after a failed write: got %s %s, want ledger_unavailable until a write succeeds", res.Status, res.Reason)
	}
}

// A principal's summary is written at most once every RefusalEvery while
// its refusals go on, and what is left when Run ends.
func TestRefusalSummariesAtMostOnceAMinute(t *testing.T) {
	b := newBench(t)
	clock := &fakeClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	b.r.env.Now = clock.Now
	bad := Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Note: strings.Repeat("n", 2000)}
	refuse := func(n int) {
		for range n {
			if res := b.r.Submit(context.Background(), bad); res.Reason != ReasonInvalidRequest {
				t.Fatalf("got %s %s, want invalid_request", res.Status, res.Reason)
			}
		}
	}
	flush := func(want int) {
		t.Helper()
		if err := b.r.FlushRefusals(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		if got := len(summaries(t, b.store)); got != want {
			t.Errorf("at %v: got %d summaries, want %d", clock.Now().Format(time.TimeOnly), got, want)
		}
	}
	refuse(5)
	flush(1) // the first is written at once
	refuse(5)
	clock.Add(30 * time.Second)
	refuse(5)
	flush(1) // not a minute since
	clock.Add(30 * time.Second)
	flush(2)
	flush(2) // nothing new
	refuse(1)
	stop := runRunner(b.r)
	stop() // the rest, at the end
	ss := summaries(t, b.store)
	if len(ss) != 3 || ss[0].Count != 5 || ss[1].Count != 10 || ss[2].Count != 1 {
		t.Fatalf("got %+v, want summaries of 5, 10 and 1", ss)
	}
	if ss[1].First != "2026-05-01T12:00:00Z" || ss[1].Last != "2026-05-01T12:00:30Z" || ss[1].Kind != AgentSession {
		t.Errorf("got %+v, want the second from 12:00:00 to 12:00:30 of an agent", ss[1])
	}
}

// flakyJournal fails every append while fail is set.
type flakyJournal struct {
	inner Journal
	mu    sync.Mutex
	fail  bool
}

func (j *flakyJournal) Append(ctx context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	j.mu.Lock()
	fail := j.fail
	j.mu.Unlock()
	if fail {
		return nil, errors.New("disk full")
	}
	return j.inner.Append(ctx, evs...)
}

// A summary that cannot be written is kept and written with what came
// meanwhile; the memory the summaries hold is bounded, however many
// principals and capabilities the refusals name.
func TestRefusalSummariesKeptAndBounded(t *testing.T) {
	b := newBench(t)
	j := &flakyJournal{inner: b.store, fail: true}
	b.r.journal = j
	bad := func(subject, capability string) {
		res := b.r.Submit(context.Background(), Invocation{Principal: Principal{Kind: AgentSession, Subject: subject, Trust: ledger.Low},
			Capability: capability, Target: "gpio.led", Note: strings.Repeat("n", 2000)})
		if res.Reason != ReasonInvalidRequest {
			t.Fatalf("got %s %s, want invalid_request", res.Status, res.Reason)
		}
	}
	bad("agent:a", "gpio.set")
	if err := b.r.FlushRefusals(context.Background(), true); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v, want the write's error", err)
	}
	bad("agent:a", "gpio.set")
	bad("agent:a", strings.Repeat("x", 500))
	for i := range MaxRefusalCapabilities + 5 {
		bad("agent:a", fmt.Sprintf("cap.n%d", i))
	}
	for i := range MaxRefusalSubjects + 10 {
		bad(fmt.Sprintf("agent:p%d", i), "gpio.set")
	}
	b.r.mu.Lock()
	held := len(b.r.refusals)
	b.r.mu.Unlock()
	if held > MaxRefusalSubjects+1 {
		t.Errorf("got %d principals held, want at most %d", held, MaxRefusalSubjects+1)
	}
	j.mu.Lock()
	j.fail = false
	j.mu.Unlock()
	if err := b.r.FlushRefusals(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	ss := summaries(t, b.store)
	a := total(ss, "agent:a")
	if want := uint64(2 + MaxRefusalCapabilities + 5 + 1); a.Count != want || a.ByCapability["gpio.set"] != 2 || a.ByCapability[InvalidCapability] != 1 || len(a.ByCapability) > MaxRefusalCapabilities+1 {
		t.Errorf("agent:a: got %d refusals by %v, want %d with gpio.set 2, one invalid, and at most %d names", a.Count, a.ByCapability, want, MaxRefusalCapabilities+1)
	}
	var all uint64
	for _, s := range ss {
		all += s.Count
	}
	if want := uint64(a.Count) + MaxRefusalSubjects + 10; all != want {
		t.Errorf("got %d refusals in all the summaries, want %d", all, want)
	}
	if others := total(ss, OtherSubjects); others.Count == 0 {
		t.Errorf("got no summary under %s, want the principals beyond %d", OtherSubjects, MaxRefusalSubjects)
	}
}

// CheckInvocation never panics, and what it accepts is within every
// bound: sizes, UTF-8, and no control character a terminal acts on.
func FuzzCheckInvocation(f *testing.F) {
	f.Add("gpio.set", "gpio.led", "k-1", "state", "on", "lights on\n")
	f.Add(strings.Repeat("a", 300), "gpio.led", "", "", "", "")
	f.Add("gpio.set", "gpio.led\n", "k 1", "", "", strings.Repeat("n", 2000))
	f.Add("body.notify", "home", "", "message", "\x1b[2J", "\xff")
	f.Fuzz(func(t *testing.T, capability, target, key, pk, pv, note string) {
		inv := Invocation{Capability: capability, Target: target, IdempotencyKey: key, Note: note}
		if pk != "" || pv != "" {
			inv.Params = map[string]string{pk: pv}
		}
		if CheckInvocation(&inv) != nil {
			return
		}
		for _, s := range []string{capability, target, key, pk, pv, note} {
			if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }) {
				t.Fatalf("accepted %q", s)
			}
		}
		if len(capability) > MaxNameBytes || len(target) > MaxNameBytes || len(key) > MaxNameBytes || len(note) > MaxNoteBytes ||
			len(pk) > MaxParamKeyBytes || len(pv) > MaxParamValueBytes || pk == "" && inv.Params != nil {
			t.Fatalf("accepted %+v out of bounds", inv)
		}
		if strings.ContainsFunc(capability+target+key+pk, unicode.IsSpace) {
			t.Fatalf("accepted a name with a space: %+v", inv)
		}
	})
}
