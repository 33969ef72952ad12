package engine

// th returns the test hooks of c for setting (cfg.th().Faults = ...): the
// engine's own tests set hooks on a Config directly. It copies them first,
// so that Configs copied from c keep theirs, as with plain fields.
func (c *Config) th() *TestHooks {
	var h TestHooks
	if c.hooks != nil {
		h = *c.hooks
	}
	c.hooks = &h
	return c.hooks
}
