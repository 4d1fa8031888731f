package lenient

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Undecodable remembers which objects of one resource could not be decoded, and why. The
// informer holds a stand-in for each (its metadata, and its status when that decodes): a
// controller asks Err before it acts on an object.
type Undecodable struct {
	mu    sync.RWMutex
	byUID map[types.UID]failure
}

type failure struct {
	resourceVersion string
	err             error
}

// NewUndecodable returns an empty record.
func NewUndecodable() *Undecodable {
	return &Undecodable{byUID: map[types.UID]failure{}}
}

// Err returns why obj, at its resourceVersion, could not be decoded; nil when it was. A nil
// *Undecodable knows of nothing.
func (u *Undecodable) Err(obj metav1.Object) error {
	if u == nil || obj == nil {
		return nil
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	f, ok := u.byUID[obj.GetUID()]
	if !ok || f.resourceVersion != obj.GetResourceVersion() {
		return nil
	}
	return f.err
}

// Len is how many objects are kept aside now.
func (u *Undecodable) Len() int {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return len(u.byUID)
}

// record keeps obj's failure and reports whether it is news (not already recorded at this
// resourceVersion), so that a relist logs and counts each failure once.
func (u *Undecodable) record(obj metav1.Object, err error) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.byUID[obj.GetUID()]
	u.byUID[obj.GetUID()] = failure{resourceVersion: obj.GetResourceVersion(), err: err}
	return !ok || old.resourceVersion != obj.GetResourceVersion()
}

// forget drops what is known of the object with uid: it decoded, or it is gone.
func (u *Undecodable) forget(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.byUID, uid)
}
