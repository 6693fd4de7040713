package gateway

import (
	"errors"
	"strings"
	"sync"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/protocol"
)

// handleRoutes finds the backend member that holds a granted execution's
// handles: from the pin table when this replica made the grant, else from
// the authenticated id itself.
type handleRoutes struct {
	pins *pins
	ids  idCodec
	mu   sync.RWMutex
	// members are every member by name, the same on every replica; a
	// member a reload removed stays until it is closed.
	members map[string]*member
}

func (hr *handleRoutes) addMember(m *member) {
	hr.mu.Lock()
	hr.members[m.name] = m
	hr.mu.Unlock()
}

// removeMember forgets m, unless a member of the same name took its place.
func (hr *handleRoutes) removeMember(m *member) {
	hr.mu.Lock()
	if hr.members[m.name] == m {
		delete(hr.members, m.name)
	}
	hr.mu.Unlock()
}

// grant pins a backend's executionId and returns the id the client sees.
func (hr *handleRoutes) grant(m *member, tenant, inner string, maxHandles int) string {
	id := hr.ids.wrap(m.name, tenant, inner)
	hr.pins.add(id, pin{member: m, tenant: tenant, inner: inner}, maxHandles)
	return id
}

// find returns where id's handles live when tenant was granted them.
// Another tenant, a forged or altered id, an unknown member and an evicted
// pin all read the same: not found.
func (hr *handleRoutes) find(id, tenant string) (pin, bool) {
	if p, ok := hr.pins.lookup(id, tenant); ok {
		return p, true
	}
	member, owner, inner, ok := hr.ids.unwrap(id)
	if !ok || owner != tenant {
		return pin{}, false
	}
	hr.mu.RLock()
	m := hr.members[member]
	hr.mu.RUnlock()
	if m == nil {
		return pin{}, false
	}
	return pin{member: m, tenant: owner, inner: inner}, true
}

// outerID keeps the backend's own executionId out of what the client reads:
// a text that names it names the client's id instead.
func outerID(err error, inner, outer string) error {
	if err == nil {
		return nil
	}
	switch protocol.CodeOf(err) {
	case protocol.CodeHandlesClosed:
		return protocol.NewHandlesClosedError(outer)
	case "":
	default:
		return err
	}
	quoted := `"` + inner + `"`
	if !strings.Contains(err.Error(), quoted) {
		return err
	}
	var hnf *protocol.HandleNotFoundError
	if errors.As(err, &hnf) {
		return protocol.NewHandleNotFoundError(outer, hnf.Handle, hnf.Granted)
	}
	var ce *capnweb.Error
	if errors.As(err, &ce) {
		c := *ce
		c.Message = strings.ReplaceAll(c.Message, quoted, `"`+outer+`"`)
		return &c
	}
	return errors.New(strings.ReplaceAll(err.Error(), quoted, `"`+outer+`"`))
}
