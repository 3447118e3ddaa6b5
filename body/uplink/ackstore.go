package uplink

import (
	"strconv"
	"strings"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// ackStore is a session's paho store. paho puts every QoS 1 publish in
// it as "o.<message id>" when it sends it, and deletes that key when the
// broker's PUBACK for the message id is read (and nowhere else in a clean
// session that is never resumed, which is how the relay runs it): so a
// delete is a PUBACK seen, in this session, for that packet. The relay
// attributes each publish to its outbox row while it publishes; the
// store hands the row on when the PUBACK comes.
type ackStore struct {
	mqtt.Store // a memory store: paho's own use of it is unchanged

	mu      sync.Mutex
	current uint64            // the row being published, 0 for none
	rows    map[uint16]uint64 // message id → row, for publishes in flight
	ch      chan uint64       // rows whose PUBACK came; never blocks paho
}

// newAckStore makes a store whose channel holds room publishes: the
// relay keeps no more in flight.
func newAckStore(room int) *ackStore {
	return &ackStore{Store: mqtt.NewMemoryStore(), rows: map[uint16]uint64{}, ch: make(chan uint64, room)}
}

// attribute names the row the next publish is for (0: none).
func (a *ackStore) attribute(seq uint64) {
	a.mu.Lock()
	a.current = seq
	a.mu.Unlock()
}

func (a *ackStore) Put(key string, m packets.ControlPacket) {
	if p, ok := m.(*packets.PublishPacket); ok && strings.HasPrefix(key, "o.") {
		a.mu.Lock()
		if a.current != 0 {
			a.rows[p.MessageID] = a.current
		} else {
			delete(a.rows, p.MessageID)
		}
		a.mu.Unlock()
	}
	a.Store.Put(key, m)
}

func (a *ackStore) Del(key string) {
	a.Store.Del(key)
	id, ok := strings.CutPrefix(key, "o.")
	if !ok {
		return
	}
	mid, err := strconv.ParseUint(id, 10, 16)
	if err != nil {
		return
	}
	a.mu.Lock()
	seq, ok := a.rows[uint16(mid)]
	delete(a.rows, uint16(mid))
	a.mu.Unlock()
	if ok {
		select {
		case a.ch <- seq:
		default:
			// Cannot happen: the relay keeps at most room publishes in
			// flight. Were it to, the row would simply go again.
		}
	}
}

// Reset is called by paho when a clean session connects.
func (a *ackStore) Reset() {
	a.mu.Lock()
	clear(a.rows)
	a.mu.Unlock()
	a.Store.Reset()
}
