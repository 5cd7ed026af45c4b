package engine

import "fmt"

// SetLogDefaults replaces the broker-wide topic defaults (what a dynamic
// broker config such as log.retention.ms changes at runtime, Kafka's
// DynamicLogConfig) and applies them without a restart: every topic's
// effective config becomes d with the topic's own overrides applied, so a
// topic without an override of a key follows the new default and one with
// an override keeps it. The new configs are published as SetTopicConfig
// publishes them (one atomic store per topic and log; segment.index.bytes
// rolls the non-empty active segments it resizes); no topic file is
// rewritten, since the defaults are not part of them: the caller persists
// d and passes it again (Options.Log) at the next start. Retention and the
// cleaner are woken. An invalid d (ErrInvalidConfig) changes nothing.
func (e *Engine) SetLogDefaults(d LogConfig) error {
	if err := validateConfig(d); err != nil {
		return err
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if err := e.adminUsable(); err != nil {
		return err
	}
	type change struct {
		t   *Topic
		cfg LogConfig
	}
	var changes []change
	for _, t := range e.Topics() {
		cfg, err := d.Apply(t.Overrides())
		if err != nil {
			return fmt.Errorf("topic %s: %w", t.Name(), err)
		}
		changes = append(changes, change{t, cfg})
	}
	e.defaults = d
	for _, c := range changes {
		cfg := c.cfg
		old := c.t.cfg.Load()
		if *old == cfg {
			continue
		}
		c.t.cfg.Store(&cfg)
		for _, l := range c.t.hostedLogs() {
			if err := l.setConfig(&cfg, old.SegmentIndexBytes != cfg.SegmentIndexBytes); err != nil {
				return err
			}
		}
	}
	e.kickRetention()
	e.kickCleaner()
	return nil
}
