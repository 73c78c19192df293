//! A config reload (SIGHUP): the new targets taken, plans kept where
//! the rule is unchanged, batches another daemon schedules left out.

use std::collections::HashMap;

use super::journal::warn;
use super::{Daemon, Load, Setup, Target};
use crate::model::{EventKind, NewEvent, Taken};
use crate::util::time::now_ms;

impl Daemon {
    /// Takes the config as it is now (SIGHUP): a batch whose rule is
    /// unchanged keeps its plan (its next fire, a queued one) and gets the
    /// new options; running cycles go on as they started. A batch another
    /// live daemon schedules is left out, and said so (one daemon a
    /// batch). A config that cannot be loaded, or that leaves this daemon
    /// no batch, is refused, said and logged, and the old one kept.
    pub(super) fn reload(&mut self, load: &mut Load<'_>) {
        let loaded = tokio::task::block_in_place(load).and_then(|setup| {
            let Setup { targets, scheduled } = setup;
            Ok((self.not_taken(targets)?, scheduled))
        });
        let (targets, scheduled) = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                self.warn_all(format!(
                    "config reload refused, the old config stays: {e:#}"
                ));
                return;
            }
        };
        self.scheduled = scheduled;
        let mut old: HashMap<String, Target> = self
            .targets
            .drain(..)
            .map(|t| (t.plan.batch.clone(), t))
            .collect();
        self.targets = targets
            .into_iter()
            .map(|mut t| {
                if let Some(before) = old.remove(&t.plan.batch) {
                    if before.plan.same_rule(&t.plan) {
                        t.plan = before.plan;
                    } else {
                        t.plan.carry_over(before.plan);
                    }
                }
                t
            })
            .collect();
        for batch in old.into_keys() {
            let message = "config reloaded: the daemon no longer schedules this batch";
            self.write_event(&NewEvent::new(now_ms(), &batch, EventKind::Daemon, message));
        }
        self.me.batches = self.batches();
        // Recorded at once, so views name the batches it schedules now;
        // checked again as it is recorded (a daemon started meanwhile).
        self.me.beat_at = 0;
        self.beat();
        let holder = self.me.holder.to_string();
        if let Err(e) = self.announce(&format!("config reloaded: daemon on {holder} schedules")) {
            warn(&format!("cannot record the reload: {e:#}"));
        }
        self.forget_unscheduled();
    }

    /// `targets` (a reload's) without the batches another live daemon
    /// schedules, each said and logged in its batch's log; refused when
    /// none is left.
    fn not_taken(&mut self, mut targets: Vec<Target>) -> anyhow::Result<Vec<Target>> {
        let wanted = crate::model::Daemon {
            batches: targets.iter().map(|t| t.plan.batch.clone()).collect(),
            ..self.me.clone()
        };
        let taken = tokio::task::block_in_place(|| self.store.daemon_taken(&wanted, now_ms()))?;
        if taken.is_empty() {
            return Ok(targets);
        }
        let said = |t: &Taken| format!("{:?} (daemon {})", t.batch, t.by);
        if taken.len() == targets.len() {
            anyhow::bail!(
                "every batch it names has another live daemon: {} (one daemon a batch)",
                taken.iter().map(said).collect::<Vec<_>>().join(", ")
            );
        }
        targets.retain(|t| !taken.iter().any(|k| k.batch == t.plan.batch));
        for t in &taken {
            let message = format!(
                "config reload: daemon on {} leaves this batch out: a live daemon ({}) already schedules it (one daemon a batch)",
                self.me.holder, t.by
            );
            self.warn_of(&t.batch, message);
        }
        Ok(targets)
    }
}
