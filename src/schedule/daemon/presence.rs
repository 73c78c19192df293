//! The daemon's claim on its batches in the store: its schedules
//! announced, its heartbeat, and stepping down from a batch another
//! live daemon took over.

use super::Daemon;
use super::journal::warn;
use crate::model::{DAEMON_BEAT, EventKind, NewEvent, Taken};
use crate::util::time::now_ms;

impl Daemon {
    /// Stores each batch's next fire and says the daemon took it over.
    pub(super) fn announce_start(&mut self) -> anyhow::Result<()> {
        let holder = self.me.holder.to_string();
        self.announce(&format!("daemon on {holder} schedules"))
    }

    /// Stops firing the batches another live daemon schedules now (it
    /// replaced this one while it was not heard from, e.g. stopped with
    /// SIGSTOP or on a machine that slept): said and logged in each one's
    /// log. Their running cycles go on as they started.
    fn step_down(&mut self, taken: &[Taken]) {
        for t in taken {
            let before = self.targets.len();
            self.targets.retain(|x| x.plan.batch != t.batch);
            if self.targets.len() == before {
                continue;
            }
            let message = format!(
                "daemon on {} steps down from this batch: a live daemon ({}) schedules it now (this one was not heard from, and was replaced); it fires it no more",
                self.me.holder, t.by
            );
            self.warn_of(&t.batch, message);
        }
        self.me.batches = self.batches();
    }

    /// Forgets the stored plan (next fire and rule) of every batch the
    /// config no longer schedules, unless another live daemon schedules
    /// it: nothing is owed for the time a batch is not scheduled, so one
    /// scheduled again fires from its next fire time, with no fire said
    /// missed and none caught up, and no view gives a next fire for it
    /// meanwhile.
    pub(super) fn forget_unscheduled(&mut self) {
        let now = now_ms();
        let forgot = tokio::task::block_in_place(|| -> anyhow::Result<()> {
            let daemons = self.store.daemons(now)?;
            let others = |batch: &String| {
                daemons.iter().any(|d| {
                    d.daemon.token != self.me.token && d.live() && d.daemon.batches.contains(batch)
                })
            };
            let planned: Vec<String> = self
                .store
                .batch_infos(None)?
                .into_iter()
                .filter(|i| i.next_fire.is_some() || i.fire_rule.is_some())
                .map(|i| i.name)
                .filter(|b| !self.scheduled.contains(b) && !others(b))
                .collect();
            for batch in planned {
                self.store.unschedule(&batch)?;
            }
            Ok(())
        });
        if let Err(e) = forgot {
            warn(&format!(
                "cannot forget the planned fires of batches no longer scheduled: {e:#}"
            ));
        }
    }

    /// Stores each batch's rule and next fire, and logs `what` with its
    /// schedule.
    pub(super) fn announce(&mut self, what: &str) -> anyhow::Result<()> {
        for t in &self.targets {
            // Stored as is (missed fires are still to be handled); said as
            // the next fire to come.
            let next = t.plan.next();
            let coming = t
                .plan
                .schedule
                .next_after(crate::util::time::now(), t.plan.tz);
            let message = format!(
                "{what} `{}` in {}; next fire {}",
                t.plan.schedule,
                t.plan.tz.name(),
                coming.map_or("never".to_string(), |n| t.plan.local(n))
            );
            let event = NewEvent::new(now_ms(), &t.plan.batch, EventKind::Daemon, message);
            // The rule beside the next fire: views give this daemon's
            // fires, whatever the file says since.
            let rule = crate::schedule::seen::Rule {
                schedule: t.plan.schedule.clone(),
                tz: t.plan.tz,
            };
            tokio::task::block_in_place(|| -> anyhow::Result<()> {
                self.store.set_fire_plan(
                    &t.plan.batch,
                    &rule.stored(),
                    next.map(|n| n.timestamp_millis()),
                    now_ms(),
                )?;
                self.store.log_event(&event)?;
                Ok(())
            })?;
            self.emit(&event);
        }
        Ok(())
    }

    /// Records the heartbeat when one is due (or the clock went back),
    /// and steps down from the batches the store says another live daemon
    /// schedules now. A store too busy to take it is tried again at the
    /// next pass; views judge a daemon on this host by its process, not
    /// its beat.
    pub(super) fn beat(&mut self) {
        let now = now_ms();
        let before = self.me.beat_at;
        if (0..DAEMON_BEAT).contains(&(now - before)) {
            return;
        }
        self.me.beat_at = now;
        match tokio::task::block_in_place(|| self.store.daemon_beat(&self.me, now)) {
            Ok(taken) => self.step_down(&taken),
            Err(e) => {
                self.me.beat_at = before;
                warn(&format!("cannot record the heartbeat: {e}"));
            }
        }
    }
}
