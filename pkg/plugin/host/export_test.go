package host

// PIDs returns the process IDs of the running plugins, by executable name.
func (h *Host) PIDs() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, p := range h.plugins {
		if pid := p.pid(); pid != 0 {
			out[p.name] = pid
		}
	}
	return out
}

// Versions returns the protocol versions the running plugins speak, by executable name.
func (h *Host) Versions() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, p := range h.plugins {
		p.mu.Lock()
		if p.client != nil {
			out[p.name] = p.client.Version()
		}
		p.mu.Unlock()
	}
	return out
}
