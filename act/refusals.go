package act

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// Refusals without a record of their own. A request outside the bounds
// of a request (CheckInvocation), one over its principal's admission
// limit (Environment.Admission) and one whose proposal the ledger refused
// as invalid are answered at once and not recorded one by one: writing
// each would let any caller grow the ledger as fast as it can send. They
// are counted per principal and written as one action.refusals event per
// principal (RefusalSummary): at most once every RefusalEvery while they
// go on, and whatever is left when Run ends, so no refusal goes
// unaccounted. The counts are kept for at most MaxRefusalSubjects
// principals and MaxRefusalCapabilities capability names each; beyond
// them they are counted under OtherSubjects and OtherCapabilities.

// EventRefusals is the type of a refusal summary. Its class is audit.
const EventRefusals = "action.refusals"

// Bounds of the refusal summaries.
const (
	// RefusalEvery is the least time between two summaries of one
	// principal.
	RefusalEvery = time.Minute
	// MaxRefusalSubjects bounds the principals counted at once; the
	// refusals of the ones beyond are counted under OtherSubjects.
	MaxRefusalSubjects = 1024
	// MaxRefusalCapabilities bounds the capability names one summary
	// counts; refusals of the ones beyond are counted under
	// OtherCapabilities.
	MaxRefusalCapabilities = 16
)

// Names that stand for several in a summary.
const (
	// OtherSubjects is the subject of the refusals of principals beyond
	// MaxRefusalSubjects.
	OtherSubjects = "(others)"
	// OtherCapabilities counts the capabilities beyond
	// MaxRefusalCapabilities in a summary's ByCapability.
	OtherCapabilities = "(others)"
	// InvalidCapability counts requests whose capability is not a name a
	// capability could have.
	InvalidCapability = "(invalid)"
)

// RefusalSummary is the payload of action.refusals: the requests of one
// principal refused without a record of their own, from First to Last.
type RefusalSummary struct {
	Subject      string            `cbor:"subject" json:"subject"`
	Kind         PrincipalKind     `cbor:"kind,omitempty" json:"kind,omitempty"`
	Count        uint64            `cbor:"count" json:"count"`
	ByReason     map[Reason]uint64 `cbor:"by_reason" json:"by_reason"`
	ByCapability map[string]uint64 `cbor:"by_capability" json:"by_capability"`
	// First and Last are when the first and the last of them came, RFC
	// 3339 in UTC.
	First string `cbor:"first" json:"first"`
	Last  string `cbor:"last" json:"last"`
}

// tally counts one principal's refusals since its last summary.
type tally struct {
	kind         PrincipalKind
	trust        ledger.Level
	count        uint64
	byReason     map[Reason]uint64
	byCapability map[string]uint64
	first, last  time.Time
	// written is when its last summary was taken to be written; zero
	// before the first.
	written time.Time
}

// add counts one refusal of a request for capability at at.
func (t *tally) add(capability string, reason Reason, at time.Time) {
	if len(capability) > MaxNameBytes || checkName(capability) != nil {
		capability = InvalidCapability
	}
	t.init()
	t.byReason[reason]++
	t.addCapability(capability, 1)
	t.span(1, at, at)
}

// merge adds what o counted to t: a summary that could not be written,
// back to be tried again.
func (t *tally) merge(o *tally) {
	if o.count == 0 {
		return
	}
	t.init()
	for r, n := range o.byReason {
		t.byReason[r] += n
	}
	for c, n := range o.byCapability {
		t.addCapability(c, n)
	}
	t.span(o.count, o.first, o.last)
}

func (t *tally) init() {
	if t.byReason == nil {
		t.byReason, t.byCapability = map[Reason]uint64{}, map[string]uint64{}
	}
}

// addCapability counts n for capability, or for OtherCapabilities when
// MaxRefusalCapabilities others are counted already.
func (t *tally) addCapability(c string, n uint64) {
	if _, ok := t.byCapability[c]; !ok && len(t.byCapability) >= MaxRefusalCapabilities {
		c = OtherCapabilities
	}
	t.byCapability[c] += n
}

// span counts n refusals from first to last.
func (t *tally) span(n uint64, first, last time.Time) {
	if t.count == 0 || first.Before(t.first) {
		t.first = first
	}
	if t.count == 0 || last.After(t.last) {
		t.last = last
	}
	t.count += n
}

// countRefusal counts a refusal of p's request for capability, not
// recorded on its own, towards p's next summary, and tells Run when the
// tally was empty.
func (r *Runner) countRefusal(p Principal, capability string, reason Reason) {
	now := r.env.Now()
	r.mu.Lock()
	t := r.refusals[p.Subject]
	if t == nil {
		subject := p.Subject
		if len(r.refusals) >= MaxRefusalSubjects {
			r.dropIdleTalliesLocked(now)
		}
		if len(r.refusals) >= MaxRefusalSubjects {
			subject = OtherSubjects
		}
		if t = r.refusals[subject]; t == nil {
			t = &tally{kind: p.Kind, trust: p.Trust}
			if subject == OtherSubjects {
				t.kind = ""
			}
			r.refusals[subject] = t
		}
	}
	wasEmpty := t.count == 0
	t.add(capability, reason, now)
	t.trust = min(t.trust, p.Trust)
	r.mu.Unlock()
	if wasEmpty {
		r.poke()
	}
}

// dropIdleTalliesLocked lets go of the tallies with nothing to write
// whose last summary is older than RefusalEvery: a new refusal of theirs
// may be written at once anyway. The caller holds mu.
func (r *Runner) dropIdleTalliesLocked(now time.Time) {
	for s, t := range r.refusals {
		if t.count == 0 && now.Sub(t.written) >= RefusalEvery {
			delete(r.refusals, s)
		}
	}
}

// refusalsDue is how long until the next summary is due, at most idle.
func (r *Runner) refusalsDue(idle time.Duration) time.Duration {
	now := r.env.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	next := idle
	for _, t := range r.refusals {
		if t.count > 0 {
			next = min(next, t.written.Add(RefusalEvery).Sub(now))
		}
	}
	return next
}

// FlushRefusals writes the summaries that are due (all of them with all:
// the runner is stopping) as action.refusals events, one per principal.
// A summary that cannot be written is kept, counted with what comes
// meanwhile, and due again at once; the error says why. Run calls it; it
// is safe for concurrent use.
func (r *Runner) FlushRefusals(ctx context.Context, all bool) error {
	now := r.env.Now()
	type due struct {
		subject string
		t       tally
	}
	var todo []due
	r.mu.Lock()
	r.dropIdleTalliesLocked(now)
	for s, t := range r.refusals {
		if t.count == 0 || !all && now.Before(t.written.Add(RefusalEvery)) {
			continue
		}
		todo = append(todo, due{s, *t})
		*t = tally{kind: t.kind, trust: t.trust, written: now}
	}
	r.mu.Unlock()
	slices.SortFunc(todo, func(a, b due) int { return cmp.Compare(a.subject, b.subject) })
	for i, d := range todo {
		if err := r.writeRefusals(ctx, d.subject, &d.t); err != nil {
			r.mu.Lock()
			for _, d := range todo[i:] {
				t := r.refusals[d.subject]
				if t == nil {
					t = &tally{kind: d.t.kind, trust: d.t.trust}
					r.refusals[d.subject] = t
				}
				t.merge(&d.t)
				t.written = d.t.written
			}
			r.mu.Unlock()
			return err
		}
	}
	return nil
}

// writeRefusals appends one principal's summary.
func (r *Runner) writeRefusals(ctx context.Context, subject string, t *tally) error {
	s := RefusalSummary{Subject: subject, Kind: t.kind, Count: t.count, ByReason: t.byReason, ByCapability: t.byCapability,
		First: t.first.UTC().Format(time.RFC3339Nano), Last: t.last.UTC().Format(time.RFC3339Nano)}
	p, err := ledger.MarshalPayload(s)
	if err != nil {
		return fmt.Errorf("act: the refusals of %s: %w", subject, err)
	}
	_, err = r.journal.Append(context.WithoutCancel(ctx), ledger.Event{Type: EventRefusals, Provenance: ledger.Observed, Trust: t.trust,
		Privacy: ledger.Internal, Payload: p})
	r.noteLedger(err)
	if err != nil {
		return fmt.Errorf("act: the summary of %d refusals of %s could not be written: %w", t.count, subject, err)
	}
	return nil
}
