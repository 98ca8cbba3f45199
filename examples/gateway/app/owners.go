package app

import "sync"

// maxCachedRooms bounds the rooms whose owner the gateway remembers.
const maxCachedRooms = 1 << 16

// roomOwners remembers, per room, the owner address a REDIRECT named and
// that then applied a command: the next command for the room goes there
// directly instead of to the room's rendezvous-hash node, which would only
// look the owner up in Redis and redirect again. Rooms live away from
// that node when room-service balances load, or after they were acquired
// while their node was not ready. An entry is dropped when its owner does
// not apply a command: the next attempt goes through the balanced
// connection again.
type roomOwners struct {
	mu sync.Mutex
	m  map[string]string // room id → owner address
}

func (o *roomOwners) get(room string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	addr, ok := o.m[room]
	return addr, ok
}

func (o *roomOwners) set(room, addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string]string)
	}
	if _, ok := o.m[room]; !ok && len(o.m) >= maxCachedRooms {
		for r := range o.m { // any one: the map's order is random
			delete(o.m, r)
			break
		}
	}
	o.m[room] = addr
}

// drop forgets room's owner if it is still addr.
func (o *roomOwners) drop(room, addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m[room] == addr {
		delete(o.m, room)
	}
}
