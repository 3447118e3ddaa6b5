package act

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Arbitration of shared resources.
//
// A capability that drives a resource others may drive too (a relay, a
// buzzer) first takes a lease on it from the LeaseTable, and the runner
// checks the lease's fencing epoch right before it drives the output.
//
// Epoch rules, per resource:
//
//   - the epoch starts at 0 and only ever grows;
//   - granting the resource to a holder (it was free, released, lapsed or
//     revoked) adds 1, so every grant has an epoch no earlier grant had;
//   - renewing a live lease by its own holder keeps the epoch;
//   - a revocation (RevokeAll, RevokeSession) adds 1, and a person taking
//     the resource over adds 1;
//   - releasing (Release, HumanRelease) frees the resource and leaves the
//     epoch; the next grant adds 1.
//
// Check passes only for the live lease's holder presenting the live
// lease's epoch, so at any moment at most one holder passes for a
// resource, and an epoch that once lost the resource never passes again.
//
// A person at the device wins: when a control the config marks as the
// human's is pressed, HumanTakeover moves the resource to the reserved
// holder HUMAN, and every other request on it is refused human_control
// until HumanRelease, or, when the table was made with a hold time,
// until that long after the last human action (each HumanTakeover is
// one). Nobody can acquire as HUMAN and nobody can take a resource from
// HUMAN, a local administrator included: only HumanRelease or the hold
// time frees it. (The Runner lets a local administrator act beside a
// person's hold, without a lease: both are people at the device.) RevokeAll and RevokeSession leave a person's hold in
// place (they bump its epoch): a revocation refuses more, never less.

// HumanHolder is the reserved Subject of the holder a person's takeover
// gives a resource to. No principal can acquire a lease as HUMAN.
const HumanHolder = "HUMAN"

// Holder is who holds a lease: the principal's Subject and the session
// that asked. Two sessions of one subject are two holders.
type Holder struct {
	Subject string
	Session string
}

// HolderOf is the holder for p's requests.
func HolderOf(p Principal) Holder { return Holder{Subject: p.Subject, Session: p.Session} }

// IsHuman tells whether h is the reserved HUMAN holder.
func (h Holder) IsHuman() bool { return h.Subject == HumanHolder }

func (h Holder) String() string {
	if h.Session == "" {
		return h.Subject
	}
	return h.Subject + " (session " + h.Session + ")"
}

// Lease is one resource's holder, fencing epoch and expiry.
type Lease struct {
	Resource string
	Holder   Holder
	Epoch    uint64
	// Expires is when the lease lapses; zero for a person's hold that
	// lasts until HumanRelease.
	Expires time.Time
}

// LeaseTable arbitrates shared resources. Make it with NewLeaseTable.
// All its methods are safe for concurrent use. Expiry is lazy: a lease
// lapses when a call with a later now looks at it; nothing runs in the
// background.
//
// Every method but RevokeAll takes the table's mutex for a short,
// allocation-light section that waits on nothing else. RevokeAll takes
// no lock at all (see there).
type LeaseTable struct {
	humanHold time.Duration

	// slots is every resource ever leased, for RevokeAll to walk without
	// the mutex. It is copied when a resource is added (under mu).
	slots atomic.Pointer[[]*leaseSlot]
	// why is the reason of the latest RevokeAll, for the details of later
	// refusals.
	why atomic.Pointer[Reason]

	mu    sync.Mutex
	index map[string]*leaseSlot
}

// leaseSlot is one resource. Its fields are guarded by the table's mutex,
// except state, which RevokeAll changes without it.
type leaseSlot struct {
	// state is bit 0: an agent (not HUMAN) holds the slot; bits 1..63:
	// revocations RevokeAll made that the slot has not applied yet.
	// RevokeAll adds a revocation and clears bit 0 in one CAS; a holder of
	// mu applies pending revocations (settle) and changes bit 0 only by a
	// CAS that expects none pending, so a revocation is never lost and
	// never applied to a lease granted after it.
	state atomic.Uint64

	resource  string
	holder    Holder // zero: free
	epoch     uint64
	expires   time.Time // an agent's lease lapses at expires
	lastHuman time.Time // the last human action, while HUMAN holds it
	humanBy   string    // the control the person used, while HUMAN holds it
	ended     string    // how the last lease ended, for details
}

const (
	slotHeld    uint64 = 1
	slotRevoked uint64 = 2 // one pending revocation
)

// NewLeaseTable makes an empty table. humanHold is how long a person's
// hold lasts after the last human action; 0 means until HumanRelease.
func NewLeaseTable(humanHold time.Duration) *LeaseTable {
	return &LeaseTable{humanHold: humanHold, index: map[string]*leaseSlot{}}
}

// Acquire asks for resource on behalf of h for ttl from now. A free,
// released, lapsed or revoked resource is granted with a new epoch; h's
// own live lease is renewed until now+ttl with its epoch unchanged.
// Refusals: human_control while a person holds it (whoever asks);
// lease_held while another holder's lease is live (Detail names the
// holder and when the lease lapses), and also for a request that cannot
// hold anything (no Subject, ttl <= 0); asking as HUMAN is refused
// human_control. On a refusal the Lease is zero.
func (t *LeaseTable) Acquire(resource string, h Holder, ttl time.Duration, now time.Time) (Lease, Decision) {
	switch {
	case h.IsHuman():
		return Lease{}, leaseRefusal(ReasonHumanControl, "%s: %s is reserved for a person at the device", resource, HumanHolder)
	case h.Subject == "":
		return Lease{}, leaseRefusal(ReasonLeaseHeld, "%s: a lease needs a holder", resource)
	case ttl <= 0:
		return Lease{}, leaseRefusal(ReasonLeaseHeld, "%s: a lease needs a positive ttl, not %v", resource, ttl)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slot(resource)
	for {
		t.settle(s)
		switch {
		case t.humanLive(s, now):
			return Lease{}, t.humanRefusal(s)
		case t.agentLive(s, now) && s.holder == h:
			s.expires = now.Add(ttl)
			return t.lease(s), Decision{Allow: true}
		case t.agentLive(s, now):
			return Lease{}, leaseRefusal(ReasonLeaseHeld, "%s is held by %s until %s", resource, s.holder, leaseStamp(s.expires))
		}
		if !s.publish(true) {
			continue // revoked meanwhile: look again
		}
		s.epoch++
		s.holder, s.expires, s.lastHuman = h, now.Add(ttl), time.Time{}
		return t.lease(s), Decision{Allow: true}
	}
}

// Check is the fencing check the runner makes right before it drives
// resource: it passes only when h holds the live lease with this epoch.
// Refusals: human_control while a person holds it (to anyone but HUMAN);
// stale_epoch for an epoch that is not the resource's current one (the
// lease moved, was revoked, or never existed), and for the current epoch
// once its lease lapsed or was released; lease_held when another holder
// has the current epoch.
func (t *LeaseTable) Check(resource string, h Holder, epoch uint64, now time.Time) Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.index[resource]
	if s == nil {
		return leaseRefusal(ReasonStaleEpoch, "%s: no lease was ever granted", resource)
	}
	t.settle(s)
	switch {
	case t.humanLive(s, now) && !h.IsHuman():
		return t.humanRefusal(s)
	case t.live(s, now) && s.holder == h && s.epoch == epoch:
		return Decision{Allow: true}
	case epoch != s.epoch:
		return leaseRefusal(ReasonStaleEpoch, "%s: epoch %d is stale, the resource is at epoch %d (%s)", resource, epoch, s.epoch, t.state(s, now))
	case !t.live(s, now):
		return leaseRefusal(ReasonStaleEpoch, "%s: the lease of epoch %d is over (%s)", resource, epoch, t.state(s, now))
	default:
		return leaseRefusal(ReasonLeaseHeld, "%s: epoch %d is held by %s, not %s", resource, epoch, s.holder, h)
	}
}

// Release frees resource when h holds it with epoch (live or lapsed) and
// tells whether it did; anything else changes nothing. HUMAN releases
// with HumanRelease.
func (t *LeaseTable) Release(resource string, h Holder, epoch uint64) bool {
	if h.IsHuman() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.index[resource]
	if s == nil {
		return false
	}
	for {
		t.settle(s)
		if s.holder != h || s.epoch != epoch {
			return false
		}
		if s.publish(false) {
			s.holder, s.expires, s.ended = Holder{}, time.Time{}, "released by "+h.String()
			return true
		}
	}
}

// RevokeAll drops every lease an agent, MQTT, an administrator or a rule
// holds and adds 1 to every resource's epoch, so no Check passes with an
// epoch granted before the call; it returns how many leases it dropped
// (a lease that had lapsed but that nobody had taken since counts too).
// A person's hold stays, with its epoch bumped.
//
// It is the e-stop's: it takes no lock (not even the table's), so it
// never parks behind a lock holder, allocates nothing unless reason
// differs from the previous call's, and costs one compare-and-swap per
// resource (retried only when it loses to another method changing that
// resource at the same instant). The revocation of
// a resource takes effect at its CAS; the bookkeeping (clearing the
// holder) happens under the table's mutex the next time anyone touches
// the resource. It is safe concurrently with every other method.
func (t *LeaseTable) RevokeAll(reason Reason) int {
	n := 0
	if p := t.slots.Load(); p != nil {
		for _, s := range *p {
			for {
				w := s.state.Load()
				if s.state.CompareAndSwap(w, (w+slotRevoked)&^slotHeld) {
					if w&slotHeld != 0 {
						n++
					}
					break
				}
			}
		}
	}
	if p := t.why.Load(); p == nil || *p != reason {
		r := reason
		t.why.Store(&r)
	}
	return n
}

// RevokeSession drops every lease held by session (an agent session
// that ended), adding 1 to each one's epoch, and returns how many. An
// empty session revokes nothing.
func (t *LeaseTable) RevokeSession(session string) int {
	if session == "" {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.index {
		for {
			t.settle(s)
			if s.holder.IsHuman() || s.holder.Session != session {
				break
			}
			if s.publish(false) {
				s.epoch++
				s.holder, s.expires, s.ended = Holder{}, time.Time{}, "revoked: session "+session+" ended"
				n++
				break
			}
		}
	}
	return n
}

// HumanTakeover records that a control the config marks as a person's
// was pressed for resource: the resource moves to HUMAN with a new epoch
// (any lease on it ends), or, when HUMAN already holds it, the hold is
// renewed (the press is the last human action) with its epoch kept. It
// returns HUMAN's lease; its Expires is zero when the hold lasts until
// HumanRelease.
func (t *LeaseTable) HumanTakeover(resource string, now time.Time) Lease {
	return t.HumanTakeoverBy(resource, "", now)
}

// HumanTakeoverBy is HumanTakeover naming the control the person used
// ("gpio.button"), which refusals then name.
func (t *LeaseTable) HumanTakeoverBy(resource, control string, now time.Time) Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slot(resource)
	for {
		t.settle(s)
		if t.humanLive(s, now) {
			s.lastHuman = now
			if control != "" {
				s.humanBy = control
			}
			return t.lease(s)
		}
		if !s.publish(false) {
			continue
		}
		if s.holder != (Holder{}) && !s.holder.IsHuman() {
			s.ended = "taken over by a person"
		}
		s.epoch++
		s.holder, s.expires, s.lastHuman, s.humanBy = Holder{Subject: HumanHolder}, time.Time{}, now, control
		return t.lease(s)
	}
}

// HumanRelease ends a person's hold on resource and tells whether there
// was one (live or run out). The resource is then free; its epoch stays
// until the next grant.
func (t *LeaseTable) HumanRelease(resource string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.index[resource]
	if s == nil {
		return false
	}
	t.settle(s)
	if !s.holder.IsHuman() {
		return false
	}
	// HUMAN never has the held bit, so there is nothing to publish.
	s.holder, s.lastHuman, s.humanBy, s.ended = Holder{}, time.Time{}, "", "released by a person"
	return true
}

// Leases is a snapshot of the leases live at now, a person's holds
// included, sorted by resource.
func (t *LeaseTable) Leases(now time.Time) []Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Lease
	for _, s := range t.index {
		t.settle(s)
		if t.live(s, now) {
			out = append(out, t.lease(s))
		}
	}
	slices.SortFunc(out, func(a, b Lease) int { return strings.Compare(a.Resource, b.Resource) })
	return out
}

// slot returns resource's slot, adding it when new. mu is held.
func (t *LeaseTable) slot(resource string) *leaseSlot {
	if s := t.index[resource]; s != nil {
		return s
	}
	if t.index == nil {
		t.index = map[string]*leaseSlot{}
	}
	s := &leaseSlot{resource: resource}
	t.index[resource] = s
	var next []*leaseSlot
	if p := t.slots.Load(); p != nil {
		next = make([]*leaseSlot, len(*p), len(*p)+1)
		copy(next, *p)
	}
	next = append(next, s)
	t.slots.Store(&next)
	return s
}

// settle applies the revocations RevokeAll left pending on s: each adds
// 1 to the epoch, and an agent's lease ends. mu is held.
func (t *LeaseTable) settle(s *leaseSlot) {
	for {
		w := s.state.Load()
		pending := w / slotRevoked
		if pending == 0 {
			return
		}
		// RevokeAll cleared the held bit with its revocation and publish
		// never sets it while one is pending, so w has it clear.
		if !s.state.CompareAndSwap(w, 0) {
			continue
		}
		s.epoch += pending
		if s.holder != (Holder{}) && !s.holder.IsHuman() {
			s.holder, s.expires = Holder{}, time.Time{}
			// The reason is for people: read in the instant between a
			// RevokeAll's CAS and its storing the reason, it is the
			// previous call's.
			s.ended = "revoked"
			if r := t.why.Load(); r != nil && *r != "" {
				s.ended = "revoked: " + string(*r)
			}
		}
		return
	}
}

// publish sets s's held bit to held, from what s.holder says it is now,
// provided no revocation is pending; false means one arrived since the
// last settle and the caller must settle and decide again. mu is held.
func (s *leaseSlot) publish(held bool) bool {
	var from, to uint64
	if s.holder != (Holder{}) && !s.holder.IsHuman() {
		from = slotHeld
	}
	if held {
		to = slotHeld
	}
	return s.state.CompareAndSwap(from, to)
}

func (t *LeaseTable) agentLive(s *leaseSlot, now time.Time) bool {
	return s.holder != (Holder{}) && !s.holder.IsHuman() && now.Before(s.expires)
}

func (t *LeaseTable) humanLive(s *leaseSlot, now time.Time) bool {
	return s.holder.IsHuman() && (t.humanHold <= 0 || now.Before(s.lastHuman.Add(t.humanHold)))
}

func (t *LeaseTable) live(s *leaseSlot, now time.Time) bool {
	return t.agentLive(s, now) || t.humanLive(s, now)
}

// lease is s as a Lease. mu is held.
func (t *LeaseTable) lease(s *leaseSlot) Lease {
	l := Lease{Resource: s.resource, Holder: s.holder, Epoch: s.epoch, Expires: s.expires}
	if s.holder.IsHuman() {
		l.Expires = time.Time{}
		if t.humanHold > 0 {
			l.Expires = s.lastHuman.Add(t.humanHold)
		}
	}
	return l
}

func (t *LeaseTable) humanRefusal(s *leaseSlot) Decision {
	who := "a person"
	if s.humanBy != "" {
		who = "a person (" + s.humanBy + ")"
	}
	if t.humanHold <= 0 {
		return leaseRefusal(ReasonHumanControl, "%s: %s took it over at %s; held by %s until the person releases it", s.resource, who, leaseStamp(s.lastHuman), HumanHolder)
	}
	return leaseRefusal(ReasonHumanControl, "%s: %s took it over; held by %s until %s, or longer if used again", s.resource, who, HumanHolder, leaseStamp(s.lastHuman.Add(t.humanHold)))
}

// state says in words who has s at now, for details. mu is held.
func (t *LeaseTable) state(s *leaseSlot, now time.Time) string {
	switch {
	case t.humanLive(s, now):
		return "held by a person"
	case t.agentLive(s, now):
		return "held by " + s.holder.String() + " until " + leaseStamp(s.expires)
	case s.holder.IsHuman():
		return "a person's hold ran out at " + leaseStamp(s.lastHuman.Add(t.humanHold))
	case s.holder != (Holder{}):
		return "the lease of " + s.holder.String() + " lapsed at " + leaseStamp(s.expires)
	case s.ended != "":
		return "free; " + s.ended
	default:
		return "free"
	}
}

func leaseRefusal(r Reason, format string, args ...any) Decision {
	return Decision{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

func leaseStamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
